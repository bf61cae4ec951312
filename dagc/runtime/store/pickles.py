"""Values as stored: pickled with protocol 5, their tensors' and arrays' data kept out of the pickle stream by
reference (no copy), so that they can be written from, and loaded into, memory directly (`dagc.runtime.store.
direct`). Also the content digest of a value (what it holds, not where it came from)."""

from __future__ import annotations

import io
import pickle
import sys
from typing import Any

import blake3


class Pickled:
    """A value pickled with protocol 5: the pickle stream, and the large buffers (tensor and array data)
    kept out of it, by reference, not copied. Written as one sealed file by `write_sealed`."""

    def __init__(self, stream: bytes, buffers: list[memoryview]) -> None:
        self.stream, self.buffers = stream, buffers

    @property
    def size(self) -> int:
        return len(self.stream) + sum(b.nbytes for b in self.buffers)


def dumps(value: object) -> Pickled:
    """`value` pickled, its tensors' and arrays' data out of band (no copy); see `Pickled`."""
    buffers: list[memoryview] = []
    stream = io.BytesIO()
    _Pickler(stream, protocol=5, buffer_callback=lambda b: buffers.append(b.raw())).dump(value)
    return Pickled(stream.getvalue(), buffers)


class Part:
    """A value already pickled by `dumps`, carried as it is: pickling a Part writes its stream and hands
    its buffers on out of band (protocol 5), so the value is neither pickled again nor copied; unpickling
    gives back the value itself. A Ray task returns its stored output as a Part, so the one pickling serves
    both the run directory and Ray's object store."""

    __slots__ = ("pickled",)

    def __init__(self, pickled: Pickled) -> None:
        self.pickled = pickled

    def __reduce__(self) -> tuple:
        return _load_part, (self.pickled.stream, *(pickle.PickleBuffer(b) for b in self.pickled.buffers))


def _load_part(stream: bytes, *buffers: Any) -> Any:
    return pickle.loads(stream, buffers=buffers)


def dumps_outputs(value: object, outputs: int) -> tuple[Pickled, list[Part]]:
    """A task's outputs pickled once: what the store writes, and one Part per output. Several outputs
    (a tuple of `outputs` values) are stored as a tuple of their Parts, which loads as the tuple."""
    if outputs > 1 and isinstance(value, tuple) and len(value) == outputs:
        parts = [Part(dumps(v)) for v in value]
        return dumps(tuple(parts)), parts
    pickled = dumps(value)
    return pickled, [Part(pickled)]


class _Pickler(pickle.Pickler):
    """Pickles a plain, contiguous CPU tensor as the bytes of its storage, a numpy array over its memory
    (which protocol 5 keeps out of band), instead of torch's own copy of the storage; tensors sharing one
    storage share it again when loaded. Anything else as pickle does."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._arrays: dict[tuple[int, int], Any] = {}

    def reducer_override(self, obj: Any) -> Any:
        torch = sys.modules.get("torch")
        if torch is None or type(obj) is not torch.Tensor:
            return NotImplemented
        try:
            storage = obj.untyped_storage()
            if not (obj.device.type == "cpu" and obj.layout == torch.strided and not obj.requires_grad
                    and obj.is_contiguous() and obj.storage_offset() == 0 and not obj.is_conj()
                    and not obj.is_neg() and storage.nbytes() == obj.numel() * obj.element_size()):
                return NotImplemented
            key = (storage.data_ptr(), storage.nbytes())
            array = self._arrays.get(key)
            if array is None:
                array = self._arrays[key] = obj.reshape(-1).view(torch.uint8).numpy()
        except (TypeError, RuntimeError, ValueError):  # a dtype without bytes view (quantized, ...): as torch does
            return NotImplemented
        return _tensor_from_bytes, (array, str(obj.dtype).removeprefix("torch."), tuple(obj.shape))


def _tensor_from_bytes(array: Any, dtype: str, shape: tuple[int, ...]) -> Any:
    import torch

    if not array.flags.writeable:  # a tensor owns writable memory
        array = array.copy()
    return torch.from_numpy(array).view(getattr(torch, dtype)).reshape(shape)


# Stored pickles name these two functions by where they were first defined, `dagc.runtime.store` (which
# re-exports them): files written before and after the store became a package load with either dagc.
_load_part.__module__ = _tensor_from_bytes.__module__ = "dagc.runtime.store"


def content_digest(value: object) -> str | None:
    """A digest of what `value` holds (its pickle, tensor and array data included, not copied); None when it does
    not pickle. Equal digests, equal content; a set of strings may pickle in another order in another process,
    which only costs a reuse."""
    try:
        pickled = dumps(value)
    except Exception:  # noqa: BLE001 - anything that does not pickle has no content key
        return None
    h = blake3.blake3(pickled.stream)
    for buffer in pickled.buffers:
        h.update(buffer)
    return h.hexdigest()[:32]
