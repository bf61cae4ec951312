"""Moving values between the ranks of a torch.distributed process group: point-to-point messages
(`send_value`/`recv_value`) and the collectives the compiler plans (`broadcast_value`, `reduce_value`,
`gather_value`), with optional 16-bit compression for transfer.

Wire formats: a tensor whose dtype and shape the compiler knows is received straight into a
buffer allocated for it; any other tensor is preceded by a small header (dtype, shape, device);
any other object is pickled into a byte tensor, preceded by the same header giving its length.
For payloads of 1 MiB or more the receiver answers the header with a one-word "ready" once its
buffer is allocated, and only then is the payload sent, so that it is received in place.
"""

from __future__ import annotations

import io
import os
import pickle
from collections.abc import Sequence
from typing import Any

# Large CPU buffers on transparent huge pages: a received tensor then costs one page fault per
# 2 MiB instead of one per 4 KiB (read by torch's CPU allocator; set before torch is imported).
os.environ.setdefault("THP_MEM_ALLOC_ENABLE", "1")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

__all__ = ["DTYPES", "COMPRESS_DTYPES", "compress_value", "decompress_value", "send_value", "recv_value",
           "broadcast_value", "reduce_value", "gather_value", "static_buffer", "wire_static"]

DTYPES: tuple[torch.dtype, ...] = (
    torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int32,
    torch.int16, torch.int8, torch.uint8, torch.bool, torch.complex64, torch.complex128,
)
_DTYPE_CODE = {dtype: i for i, dtype in enumerate(DTYPES)}
_HEADER = 12  # kind, dtype, ndim, on_cuda, requires_grad, 0, 0, dims (up to 5) | payload bytes
_MAX_DIMS = 5
_KIND_TENSOR, _KIND_PICKLE = 1, 2
# Payloads from this size on wait for the receiver's "buffer ready" before they are sent, so that
# they land in the receiver's buffer directly instead of being staged and copied (one round trip,
# tens of microseconds, against a copy of the whole payload).
_HANDSHAKE = 1 << 20


# ---- compression for transfer (`compress="bf16"` / "fp16" on a task) -----------------------------------
COMPRESS_DTYPES: dict[str, torch.dtype] = {"bf16": torch.bfloat16, "fp16": torch.float16}
# floating dtypes that compression narrows (16-bit ones already are as small)
_WIDE_FLOATS = (torch.float32, torch.float64)


class _Narrowed:
    """A tensor sent narrowed, with the dtype it is restored to on arrival (inside a pickled value)."""

    def __init__(self, tensor: torch.Tensor, dtype: torch.dtype) -> None:
        self.tensor, self.dtype = tensor, dtype

    def __reduce__(self) -> tuple[Any, ...]:
        return (_Narrowed, (self.tensor, self.dtype))


def compress_value(value: Any, kind: str) -> Any:
    """`value` with every float32/float64 tensor (also inside lists, tuples and dicts) cast to the
    16-bit dtype of `kind`; `decompress_value` casts them back."""
    narrow = COMPRESS_DTYPES[kind]
    if isinstance(value, torch.Tensor):
        return _Narrowed(value.detach().to(narrow).requires_grad_(value.requires_grad), value.dtype) if value.dtype in _WIDE_FLOATS else value
    if isinstance(value, list):
        return [compress_value(v, kind) for v in value]
    if isinstance(value, tuple) and not hasattr(value, "_fields"):
        return tuple(compress_value(v, kind) for v in value)
    if isinstance(value, dict) and type(value) is dict:
        return {k: compress_value(v, kind) for k, v in value.items()}
    return value


def decompress_value(value: Any) -> Any:
    """The inverse of `compress_value` (up to the 16-bit rounding)."""
    if isinstance(value, _Narrowed):
        return value.tensor.to(value.dtype)
    if isinstance(value, list):
        return [decompress_value(v) for v in value]
    if isinstance(value, tuple) and not hasattr(value, "_fields"):
        return tuple(decompress_value(v) for v in value)
    if isinstance(value, dict) and type(value) is dict:
        return {k: decompress_value(v) for k, v in value.items()}
    return value


# ---- transfers -------------------------------------------------------------------------------------
def _header(values: Sequence[int], device: torch.device) -> torch.Tensor:
    out = torch.zeros(_HEADER, dtype=torch.int64)
    out[: len(values)] = torch.tensor(list(values), dtype=torch.int64)
    return out.to(device)


def _wait_ready(dst: int, tag: int, device: torch.device) -> None:
    dist.recv(torch.empty(1, dtype=torch.int64, device=device), dst, tag=tag)


def _ready(src: int, tag: int, device: torch.device) -> None:
    dist.send(torch.ones(1, dtype=torch.int64, device=device), src, tag=tag)


def _send(tensor: torch.Tensor, dst: int, tag: int, pending: list | None, owned: bool) -> None:
    """Send `tensor` to `dst`. A small one goes without waiting for the receiver (`pending` keeps the send and
    its tensor until it completes), so that a rank whose reader is still busy goes on to its next task; a
    copy is sent unless the tensor is the sender's own (`owned`), since the task after may change the value
    in place. A large one (at least `_HANDSHAKE` bytes) is sent and waited for, as its receiver asked for it."""
    if pending is None or tensor.numel() * tensor.element_size() >= _HANDSHAKE:
        dist.send(tensor, dst, tag=tag)
        return
    payload = tensor if owned else tensor.clone()
    pending.append((dist.isend(payload, dst, tag=tag), payload))


def send_value(value: Any, dst: int, tag: int, device: torch.device,
               static: tuple[str, tuple[int, ...]] | None = None, compress: str | None = None,
               pending: list | None = None) -> int:
    """Send `value` to rank `dst`; returns the payload bytes. `device` is the transport's device
    (a CUDA device under nccl, the CPU under gloo). With `compress` ("bf16"/"fp16"), floating
    tensors travel in 16 bits and are cast back on arrival (the receiver passes the same `compress`).
    `pending`: where sends of small values that have not completed yet are kept (`_send`); None: every send
    is waited for."""
    restore = 0  # 1 + the dtype code a tensor sent narrowed is cast back to on arrival
    if compress is not None:
        packed = compress_value(value, compress)
        if isinstance(packed, _Narrowed) and static is not None:  # the receiver knows both dtypes
            value, static = packed.tensor, wire_static(static, compress)
        elif isinstance(packed, _Narrowed):
            value, restore = packed.tensor, _DTYPE_CODE[packed.dtype] + 1
        else:
            value = packed
    if static is not None and isinstance(value, torch.Tensor) and value.dtype == getattr(torch, static[0]) \
            and tuple(value.shape) == tuple(static[1]):
        payload = value.detach().to(device).contiguous()
        _send(payload, dst, tag, pending, owned=payload.data_ptr() != value.data_ptr())
        return payload.numel() * payload.element_size()
    if (isinstance(value, torch.Tensor) and value.dtype in _DTYPE_CODE and value.dim() <= _MAX_DIMS
            and not value.is_sparse and static is None):
        payload = value.detach().to(device).contiguous()
        nbytes = payload.numel() * payload.element_size()
        head = [_KIND_TENSOR, _DTYPE_CODE[value.dtype], value.dim(), int(value.is_cuda),
                int(value.requires_grad), int(nbytes >= _HANDSHAKE), restore, *value.shape]
        _send(_header(head, device), dst, tag, pending, owned=True)
        if nbytes >= _HANDSHAKE:
            _wait_ready(dst, tag, device)
        _send(payload, dst, tag, pending, owned=payload.data_ptr() != value.data_ptr())
        return nbytes
    buffer = io.BytesIO()
    pickle.dump(value, buffer, protocol=pickle.HIGHEST_PROTOCOL)
    data = buffer.getbuffer()
    payload = torch.frombuffer(bytearray(data), dtype=torch.uint8).to(device)
    if static is None:
        handshake = len(data) >= _HANDSHAKE
        _send(_header([_KIND_PICKLE, 0, 0, 0, 0, int(handshake), 0, len(data)], device), dst, tag, pending,
              owned=True)
        if handshake:
            _wait_ready(dst, tag, device)
    else:  # the compiler expected a tensor of a known shape: say that something else comes
        raise TypeError(f"expected a {static[0]} tensor of shape {list(static[1])} to send to rank {dst}, "
                        f"got {type(value).__name__}"
                        + (f" {value.dtype} {list(value.shape)}" if isinstance(value, torch.Tensor) else ""))
    _send(payload, dst, tag, pending, owned=True)
    return len(data)


def recv_value(src: int, tag: int, device: torch.device,
               static: tuple[str, tuple[int, ...]] | None = None, out: torch.Tensor | None = None,
               compress: str | None = None) -> Any:
    """Receive what `send_value` sent from rank `src` (a static tensor into `out` when given)."""
    if compress is not None:
        wire = wire_static(static, compress)
        value = recv_value(src, tag, device, wire, out)  # `out`, when given, is allocated for `wire`
        return _widen_from_wire(value, static)
    if static is not None:
        buffer = out if out is not None else static_buffer(static, device)
        dist.recv(buffer, src, tag=tag)
        return buffer
    head = torch.empty(_HEADER, dtype=torch.int64, device=device)
    dist.recv(head, src, tag=tag)
    h = head.tolist()
    if h[0] == _KIND_TENSOR:
        dtype, ndim = DTYPES[h[1]], h[2]
        buffer = torch.empty(tuple(h[7 : 7 + ndim]), dtype=dtype, device=device)
        if h[5]:
            _ready(src, tag, device)
        dist.recv(buffer, src, tag=tag)
        return _finish_tensor(buffer, h)
    if h[0] == _KIND_PICKLE:
        buffer = torch.empty(h[7], dtype=torch.uint8, device=device)
        if h[5]:
            _ready(src, tag, device)
        dist.recv(buffer, src, tag=tag)
        return pickle.loads(memoryview(buffer.cpu().numpy()))
    raise RuntimeError(f"malformed message header from rank {src} (tag {tag}): {h}")


def _finish_tensor(buffer: torch.Tensor, h: list[int]) -> torch.Tensor:
    """A received tensor as it was sent: on the CPU if it came from there, in its own dtype (sent
    narrowed, it is cast back), with its gradient flag."""
    if not h[3] and buffer.device.type != "cpu":
        buffer = buffer.cpu()
    if h[6]:
        buffer = buffer.to(DTYPES[h[6] - 1])
    if h[4]:
        buffer.requires_grad_(True)
    return buffer


def wire_static(static: tuple[str, tuple[int, ...]] | None, compress: str
                 ) -> tuple[str, tuple[int, ...]] | None:
    if static is None or getattr(torch, static[0]) not in _WIDE_FLOATS:
        return static
    return str(COMPRESS_DTYPES[compress]).removeprefix("torch."), static[1]


def _widen_from_wire(value: Any, static: tuple[str, tuple[int, ...]] | None) -> Any:
    if static is not None and isinstance(value, torch.Tensor) and value.dtype != getattr(torch, static[0]):
        return value.to(getattr(torch, static[0]))
    return decompress_value(value)


def broadcast_value(value: Any, root: int, group: Any, device: torch.device,
                    static: tuple[str, tuple[int, ...]] | None = None, compress: str | None = None,
                    out: torch.Tensor | None = None) -> Any:
    """Broadcast `value` from global rank `root` to every rank of `group` (a collective: every rank of
    the group calls it, in the same order); returns the value on every rank (on the root, `value`
    itself). Same wire format as `send_value`: a statically shaped tensor goes alone (into `out` on
    the other ranks, when given: a buffer for the wire's dtype and shape), anything else after a
    header."""
    is_root = dist.get_rank() == root
    if compress is not None:
        wire = wire_static(static, compress)
        sent = compress_value(value, compress) if is_root else None
        if isinstance(sent, _Narrowed) and static is not None:  # every rank knows both dtypes
            sent = sent.tensor
        received = broadcast_value(sent, root, group, device, wire, out=out)
        return value if is_root else _widen_from_wire(received, static)
    if static is not None:
        if is_root:
            if not (isinstance(value, torch.Tensor) and value.dtype == getattr(torch, static[0])
                    and tuple(value.shape) == tuple(static[1])):
                raise TypeError(f"expected a {static[0]} tensor of shape {list(static[1])} to broadcast, "
                                f"got {type(value).__name__}")
            payload = value.detach().to(device).contiguous()
            dist.broadcast(payload, root, group=group)
            return value
        buffer = out if out is not None else static_buffer(static, device)
        dist.broadcast(buffer, root, group=group)
        return buffer
    head = torch.zeros(_HEADER, dtype=torch.int64, device=device)
    payload: torch.Tensor | None = None
    if is_root:
        if isinstance(value, _Narrowed):  # a bare tensor sent narrow: say which dtype to restore
            tensor, restore = value.tensor, _DTYPE_CODE[value.dtype] + 1
        else:
            tensor, restore = value, 0
        if (isinstance(tensor, torch.Tensor) and tensor.dtype in _DTYPE_CODE and tensor.dim() <= _MAX_DIMS
                and not tensor.is_sparse):
            payload = tensor.detach().to(device).contiguous()
            head = _header([_KIND_TENSOR, _DTYPE_CODE[tensor.dtype], tensor.dim(), int(tensor.is_cuda),
                            int(tensor.requires_grad), 0, restore, *tensor.shape], device)
        else:
            data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
            payload = torch.frombuffer(bytearray(data), dtype=torch.uint8).to(device)
            head = _header([_KIND_PICKLE, 0, 0, 0, 0, 0, 0, len(data)], device)
    dist.broadcast(head, root, group=group)
    h = head.tolist()
    if is_root:
        dist.broadcast(payload, root, group=group)  # type: ignore[arg-type]
        return value
    if h[0] == _KIND_TENSOR:
        buffer = torch.empty(tuple(h[7 : 7 + h[2]]), dtype=DTYPES[h[1]], device=device)
        dist.broadcast(buffer, root, group=group)
        return _finish_tensor(buffer, h)
    buffer = torch.empty(h[7], dtype=torch.uint8, device=device)
    dist.broadcast(buffer, root, group=group)
    return pickle.loads(memoryview(buffer.cpu().numpy()))


_SUMMABLE = (torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int32, torch.int16,
             torch.int8, torch.uint8)


def _describe(value: Any) -> list[int]:
    """(kind, dtype, ndim, on CUDA, 0, 0, 0, dims…) of a value, for ranks to agree on a reduce."""
    if isinstance(value, torch.Tensor) and value.dtype in _SUMMABLE and value.dim() <= _MAX_DIMS \
            and not value.is_sparse:
        return [_KIND_TENSOR, _DTYPE_CODE[value.dtype], value.dim(), int(value.is_cuda), 0, 0, 0, *value.shape]
    return [_KIND_PICKLE]


def reduce_value(value: Any, root: int, group: Any, device: torch.device, order: Sequence[int],
                 divisor: float | None = None, everywhere: bool = False, start: int | None = None) -> Any:
    """Sum every rank's `value` onto global rank `root` (a collective over `group`); `order` lists
    the ranks in the order Python adds their operands, after `start` when given (Python's `sum`
    starts from 0: `0 + t` makes a bool tensor int64 and -0.0 0.0). Returns the sum (divided by
    `divisor` when given) on the root, None elsewhere; with `everywhere`, on every rank (an
    all-reduce).

    The ranks first exchange what they hold (a 96-byte header each). Tensors of one dtype and shape
    are summed by `dist.reduce` (each rank's operand is copied first: the collective works in
    place); anything else (other shapes that Python would broadcast, other dtypes it would promote,
    non-tensors) is gathered onto the root and added there in `order`, exactly as Python does."""
    rank = dist.get_rank()
    ranks = sorted(order)
    heads = [torch.empty(_HEADER, dtype=torch.int64, device=device) for _ in ranks]
    dist.all_gather(heads, _header(_describe(value), device), group=group)
    rows = [h.tolist() for h in heads]
    if rows[0][0] == _KIND_TENSOR and all(row == rows[0] for row in rows):
        total = value.detach().to(device).clone(memory_format=torch.contiguous_format)
        if everywhere:
            dist.all_reduce(total, op=dist.ReduceOp.SUM, group=group)
        else:
            dist.reduce(total, root, op=dist.ReduceOp.SUM, group=group)
        if rank != root and not everywhere:
            return None
        if not rows[0][3] and total.device.type != "cpu":
            total = total.cpu()
        if start is not None:
            total = start + total  # the same dtype and value as ((0 + a) + b) + …, up to the order
        return total / divisor if divisor is not None else total
    gathered: list[Any] = [None] * len(ranks) if rank == root or everywhere else []
    if everywhere:
        dist.all_gather_object(gathered, value, group=group)
    else:
        dist.gather_object(value, gathered if rank == root else None, dst=root, group=group)
    if rank != root and not everywhere:
        return None
    by_rank = dict(zip(ranks, gathered))
    total = by_rank[order[0]] if start is None else start + by_rank[order[0]]
    for r in order[1:]:
        total = total + by_rank[r]
    return total / divisor if divisor is not None else total


def gather_value(value: Any, root: int, group: Any, device: torch.device, order: Sequence[int],
                 static: tuple[str, tuple[int, ...]] | None = None, compress: str | None = None,
                 tag: int = 0, out: Sequence[torch.Tensor] | None = None) -> Any:
    """Gather the `value` of every rank in `order` onto global rank `root` (a collective over
    `group`: every rank of it calls it, the root with None); returns on the root the values in
    `order` (a list), None elsewhere.

    Statically shaped tensors (`static`) go straight into the root's buffers (`out`, one per sender
    in `order`, allocated before the run; else here): the root posts one receive per sender at once
    and each sender sends, as NCCL's gather does — gloo's `dist.gather` would stage everything in
    one flat buffer and copy it out again. Anything else goes by `dist.gather_object` (pickled, as a
    message's value would be). With `compress`, floating tensors travel narrowed and are widened on
    the root."""
    rank = dist.get_rank()
    if static is not None:
        wire = wire_static(static, compress) if compress is not None else static
        if rank != root:
            sent = compress_value(value, compress) if compress is not None else value
            tensor = sent.tensor if isinstance(sent, _Narrowed) else sent
            if not (isinstance(tensor, torch.Tensor) and tensor.dtype == getattr(torch, wire[0])
                    and tuple(tensor.shape) == tuple(wire[1])):
                raise TypeError(f"expected a {static[0]} tensor of shape {list(static[1])} to gather, "
                                f"got {type(value).__name__}")
            dist.send(tensor.detach().to(device).contiguous(), root, tag=tag)
            return None
        buffers = list(out) if out is not None else [static_buffer(wire, device) for _ in order]
        requests = dist.batch_isend_irecv([dist.P2POp(dist.irecv, buffer, src, tag=tag)
                                           for buffer, src in zip(buffers, order)])
        for request in requests:
            request.wait()
        return [_widen_from_wire(b, static) if compress is not None else b for b in buffers]
    ranks = sorted({root, *order})
    sent = compress_value(value, compress) if compress is not None and rank != root else value
    gathered: list[Any] | None = [None] * len(ranks) if rank == root else None
    dist.gather_object(sent, gathered, dst=root, group=group)
    if rank != root:
        return None
    by_rank = dict(zip(ranks, gathered))  # type: ignore[arg-type]
    return [decompress_value(by_rank[r]) if compress is not None else by_rank[r] for r in order]


def static_buffer(static: tuple[str, tuple[int, ...]], device: torch.device) -> torch.Tensor:
    """A buffer for a statically shaped tensor, its pages already mapped (so receiving into it
    runs at the link's speed rather than the page-fault handler's)."""
    return torch.empty(tuple(static[1]), dtype=getattr(torch, static[0]), device=device).zero_()
