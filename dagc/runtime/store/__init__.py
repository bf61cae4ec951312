"""The store: what runs keep on disk, in layers, each with one job.

    files         bytes on disk: atomic writes (a temporary file, then a rename; a killed writer's temporary
                  files are removed by the next write of that entry), opens that never follow a link
    seals         this user's store key; keyed digests and sealed manifests of files and directories
    direct        zero-copy I/O of tensor and array data (O_DIRECT where the file system allows it)
    pickles       values pickled with their tensors' data out of band (`dumps`, `Part`)
    sealed        sealed files: a pickle with its keyed digest, loaded only when the digest matches
    objects       content addressing: sealed objects by key, kept, checked, loaded, discarded, adopted
    records       the run's records: one run directory (`RunStore`): outputs, run.json, the event log's
                  place, the result, the lock, attempts
    cache         the cache shared across runs (`Cache`), by fingerprint alone
    fingerprints  the keys outputs are found by
    writebehind   outputs written on a background thread
    errors        `DamagedOutput` (a file failed its check), `StorageError` (cannot be written: one line
                  naming the path and what to do)

Every stored pickle is *sealed*: a header holds a keyed BLAKE3 digest of the rest, made with this user's store
key (`~/.dagc/store.key`, or `$DAGC_STORE_KEY`). A file whose digest does not match — damaged, truncated, or
written by anyone without the key (a planted pickle) — is never unpickled: the task that made it runs again
(docs/runtime.md, "Integrity and trust"). Every file is written atomically and only its owner may read or write
it (mode 0600).

Everything emitted programs and the runtime use is imported from here (`dagc.runtime.store`). This package
imports nothing from the compiler; emitted programs import it.
"""

from __future__ import annotations

from dagc.runtime.store.cache import Cache
from dagc.runtime.store.errors import DamagedOutput, StorageError, unwritable
from dagc.runtime.store.files import atomic_write
from dagc.runtime.store.fingerprints import fingerprint, output_fingerprint, value_fingerprint
from dagc.runtime.store.pickles import (  # (the two functions stored pickles name: see pickles.py)
    Part,
    Pickled,
    _load_part,
    _tensor_from_bytes,
    content_digest,
    dumps,
    dumps_outputs,
)
from dagc.runtime.store.records import FORMAT, RunStore
from dagc.runtime.store.sealed import check_sealed, load_sealed, write_sealed
from dagc.runtime.store.seals import check_directory, directory_digests, is_sealed, seal_manifest, store_key
from dagc.runtime.store.writebehind import WriteBehind, flush_writes, write_behind

__all__ = ["FORMAT", "RunStore", "Cache", "DamagedOutput", "StorageError", "fingerprint", "value_fingerprint",
           "output_fingerprint", "atomic_write", "write_sealed", "load_sealed", "check_sealed", "store_key",
           "dumps", "dumps_outputs", "Pickled", "Part", "content_digest", "directory_digests", "seal_manifest",
           "is_sealed", "check_directory", "unwritable", "WriteBehind", "write_behind", "flush_writes",
           "_load_part", "_tensor_from_bytes"]
