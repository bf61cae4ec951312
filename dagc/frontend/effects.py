"""Effect inference: what a task's body may do besides computing its result, read off its source.

Plain Python passes references, so a task may update its arguments in place (`model.train()`,
`opt.step()`, `log.append(x)`), touch module-level state, draw from the global random number
generators, or act on the world (print, write files). The compiler may remove, merge, reorder or
move a call only when its effects allow it, so inference is conservative: when unsure, it assumes
the effect. Declarations relax it: `pure=True` (no effects at all; the result depends only on the
arguments) and `readonly=["param", ...]` (the task never changes those arguments).

Evidence that a parameter may be mutated, for a parameter `p` or any local that may alias it (a
name assigned from an expression that mentions it, a loop variable over it):
  * assignment into it: `p.x = …`, `p[k] = …`, `del p[k]`, `p += …`, `p.x += …`;
  * a method call on it that is not known to leave its receiver alone (`p.append`, `p.step()`,
    `p.train()`, any method ending in `_`, any method dagc does not know);
  * calling it (`model(x)` runs forward hooks and updates running statistics);
  * passing it to a function that is not known to leave its arguments alone (user helpers are
    analysed the same way, recursively; library functions are trusted only from a short list).
The world: calls of `print`, `open`, `torch.save`, `logging`, `os`, `shutil`, `subprocess`, and any
call dagc does not know. The global RNG: `random.*`, `numpy.random.*`, `torch.rand*`/`randn*`/…
without `generator=`, and constructors of `torch.nn` layers that initialise weights.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from dagc.frontend.modules import Constant, ImportedModule, ImportedName, ModuleInfo, Opaque, Project, TaskDef

__all__ = ["Effects", "Evidence", "EffectAnalyzer", "SCALAR_TYPES", "is_scalar_type"]


@dataclass(frozen=True)
class Evidence:
    """Where and why an effect was inferred (1-based line, 0-based column of the task's file)."""

    line: int
    col: int
    reason: str


@dataclass
class Effects:
    """What one function may do. `mutates` maps parameter names to the first evidence found."""

    mutates: dict[str, Evidence] = field(default_factory=dict)
    definite: dict[str, Evidence] = field(default_factory=dict)  # certain changes (checked against declarations)
    world: Evidence | None = None
    rng: Evidence | None = None
    globals_written: dict[str, Evidence] = field(default_factory=dict)
    globals_read: set[str] = field(default_factory=set)
    seeds: bool = False  # seeds a global generator itself, so its draws do not depend on earlier tasks
    # the file system: tasks that write files are ordered after earlier readers and writers, readers
    # after earlier writers (a checkpoint saved by one task and loaded by the next)
    file_read: Evidence | None = None
    file_write: Evidence | None = None

    @property
    def is_pure(self) -> bool:
        return not (self.mutates or self.world or self.rng or self.globals_written)


SCALAR_TYPES = frozenset({"int", "float", "str", "bool", "None", "bytes", "complex", "Literal"})


def is_scalar_type(annotation: str | None) -> bool:
    """An annotation whose values cannot share mutable objects with anything (int, str, tuple[int, …])."""
    if annotation is None:
        return False
    text = annotation.replace(" ", "")
    if text in SCALAR_TYPES:
        return True
    for prefix in ("tuple[", "Tuple[", "typing.Tuple[", "Optional[", "typing.Optional[", "Literal[", "typing.Literal["):
        if text.startswith(prefix) and text.endswith("]"):
            if prefix.startswith(("Literal", "typing.Literal")):
                return True
            inner = text[len(prefix):-1]
            return all(is_scalar_type(part) for part in _split_args(inner) if part != "...")
    if "|" in text:
        return all(is_scalar_type(part) for part in text.split("|"))
    return False


def _split_args(text: str) -> list[str]:
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts


# Methods known to leave their receiver unchanged (tensors, arrays, dicts, lists, strings, modules).
_READ_METHODS = frozenset("""
mean sum std var max min argmax argmin abs item tolist numpy clone detach size dim numel view view_as
reshape flatten squeeze unsqueeze permute transpose t contiguous matmul mm bmm dot exp log sqrt pow
softmax log_softmax sigmoid tanh relu norm round floor ceil clamp eq ne lt le gt ge all any nonzero
get keys values items copy index count startswith endswith split join strip lstrip rstrip lower upper
format encode decode replace parameters named_parameters state_dict children modules named_modules
buffers named_buffers type_as new_zeros new_ones new_empty new_full new_tensor expand expand_as repeat
chunk unbind gather index_select masked_fill masked_select where argsort topk cumsum cumprod prod
median mode unique diff isnan isinf isfinite float_power add sub mul div neg reciprocal sign exp2
log2 log10 log1p sin cos tan cross outer kron trace diag triu tril flip roll narrow select take
to_dict to_numpy tobytes hex isdigit isalpha splitlines partition rpartition find rfind zfill
astype reshape_as squeeze_ numel is_contiguous is_floating_point element_size nbytes stride
data_ptr storage_offset __len__ __getitem__ __contains__ issubset issuperset union intersection
difference symmetric_difference isdisjoint most_common
""".split()) - {"squeeze_"}

# Methods that certainly change their receiver (checked against readonly=/pure= declarations).
_KNOWN_MUTATORS = frozenset("append extend insert pop remove clear update setdefault popitem add discard sort "
                            "reverse zero_grad step load_state_dict train eval register_buffer "
                            "register_parameter apply requires_grad_".split())


def _path_root(expr: ast.expr | None) -> str | None:
    """`p` for `p`, `p.a`, `p[k].b`: the name an attribute/item path starts from, else None."""
    while isinstance(expr, (ast.Attribute, ast.Subscript)):
        expr = expr.value
    return expr.id if isinstance(expr, ast.Name) else None


_CONTAINER_METHODS = frozenset("append extend insert pop remove clear update setdefault popitem add discard "
                               "sort reverse".split())

# Conversions: a new tensor or array, but the same module converted in place.
_CONVERSIONS = frozenset("to half float double bfloat16 cpu cuda type int long bool char short byte".split())


def _is_data_annotation(annotation: str | None) -> bool:
    """A parameter annotated as a tensor, an array or a container of them (not as a module)."""
    if annotation is None or "Module" in annotation:
        return False
    return any(word in annotation for word in ("Tensor", "ndarray", "array", "DataFrame", "Series"))


# Methods with no effect on anything but their result, that also never return an alias.
_FRESH_METHODS = frozenset("item tolist numel size dim mean sum std var max min argmax argmin abs norm "
                           "count index startswith endswith isdigit isalpha find rfind".split())

# Attributes that are plain data (reading them never yields an alias of the object).
_SCALAR_ATTRS = frozenset({"shape", "dtype", "device", "ndim", "is_cuda", "requires_grad", "training",
                           "__name__", "__class__"})

# Builtins that neither change their arguments nor act on the world.
_PURE_BUILTINS = frozenset("""
len sorted list tuple dict set frozenset sum min max zip enumerate isinstance issubclass str repr int
float bool round abs any all map filter range reversed format hash id type getattr hasattr iter
divmod pow chr ord bin hex oct callable vars dir slice complex bytes bytearray ascii
""".split())
_FRESH_BUILTINS = frozenset("len sum min max isinstance issubclass str repr int float bool round abs any "
                            "all hash id callable divmod pow chr ord bin hex oct ascii".split())
_WORLD_BUILTINS = frozenset({"print", "open", "input", "exec", "eval", "exit", "quit", "breakpoint",
                             "setattr", "delattr", "__import__", "compile", "globals", "locals"})

# Library modules whose functions neither change their arguments nor act on the world, except where listed.
_PURE_MODULES = ("math", "statistics", "json", "copy", "operator", "functools", "itertools", "string",
                 "re", "collections", "dataclasses", "typing", "numbers", "decimal", "fractions", "bisect",
                 "heapq", "hashlib", "base64", "textwrap", "pickle", "torch", "numpy", "np", "einops",
                 "os.path", "pathlib")
_IMPURE_FUNCTIONS = frozenset({
    "json.dump", "pickle.dump", "torch.save", "numpy.save", "numpy.savez", "numpy.savetxt",
    "numpy.copyto", "numpy.put", "numpy.place", "numpy.fill_diagonal", "numpy.random.shuffle",
    "heapq.heappush", "heapq.heappop", "heapq.heapify", "heapq.heapreplace", "heapq.heappushpop",
    "bisect.insort", "bisect.insort_left", "bisect.insort_right", "torch.distributed", "torch.cuda",
    "torch.set_num_threads", "torch.set_default_dtype", "torch.use_deterministic_algorithms",
    "torch.set_grad_enabled", "torch.backends", "torch.hub", "torch.load", "numpy.load", "pathlib.Path",
    "os.path.exists", "os.path.isfile", "os.path.isdir", "os.path.getsize", "os.path.getmtime",
})
# Seeding the global generators is an effect on global state too (it changes what later draws give).
_RNG_FUNCTIONS = frozenset({
    "torch.rand", "torch.randn", "torch.randint", "torch.randperm", "torch.rand_like", "torch.randn_like",
    "torch.randint_like", "torch.bernoulli", "torch.multinomial", "torch.normal", "torch.poisson",
    "torch.manual_seed", "torch.seed", "torch.nn.functional.dropout", "torch.utils.data.random_split",
    "numpy.random.seed", "torch.cuda.manual_seed", "lightning.seed_everything", "transformers.set_seed",
    "pytorch_lightning.seed_everything", "torch.cuda.manual_seed_all", "torch.random.manual_seed",
})
_SEEDING = frozenset({"torch.manual_seed", "random.seed", "numpy.random.seed", "torch.random.manual_seed",
                      "torch.cuda.manual_seed_all", "lightning.seed_everything", "pytorch_lightning.seed_everything",
                      "transformers.set_seed"})
_RNG_PREFIXES = ("random.", "numpy.random.", "torch.nn.init.")
_RNG_EXEMPT = frozenset({"random.Random", "random.SystemRandom", "numpy.random.default_rng",
                         "numpy.random.RandomState", "numpy.random.Generator", "numpy.random.PCG64",
                         "numpy.random.SeedSequence"})
# torch.nn layers that draw their initial weights from the global generator.
_RNG_LAYERS = frozenset("""
Linear Bilinear LazyLinear Conv1d Conv2d Conv3d ConvTranspose1d ConvTranspose2d ConvTranspose3d Embedding
EmbeddingBag RNN LSTM GRU RNNCell LSTMCell GRUCell Transformer TransformerEncoderLayer TransformerDecoderLayer
MultiheadAttention Dropout Dropout1d Dropout2d Dropout3d AlphaDropout PReLU
""".split())
_WORLD_PREFIXES = ("os.", "shutil.", "subprocess.", "logging.", "sys.", "socket.", "requests.", "urllib.",
                   "wandb.", "mlflow.", "tensorboard", "time.sleep", "builtins.")
_MUTATING_KWARGS = {"out", "inplace"}
# Functions and methods that read or write files (ordering among tasks: docs/ir.md "Effects and state").
_FILE_READS = frozenset({
    "torch.load", "numpy.load", "numpy.loadtxt", "numpy.genfromtxt", "numpy.fromfile", "json.load",
    "pickle.load", "os.listdir", "os.scandir", "os.walk", "os.stat", "os.path.exists", "os.path.isfile",
    "os.path.isdir", "os.path.getsize", "os.path.getmtime", "os.path.lexists", "glob.glob", "glob.iglob",
    "safetensors.torch.load_file", "yaml.safe_load", "yaml.load", "csv.reader", "csv.DictReader",
})
_FILE_WRITES = frozenset({
    "torch.save", "numpy.save", "numpy.savez", "numpy.savez_compressed", "numpy.savetxt", "json.dump",
    "pickle.dump", "os.remove", "os.unlink", "os.rename", "os.replace", "os.makedirs", "os.mkdir", "os.rmdir",
    "os.removedirs", "os.symlink", "os.link", "os.truncate", "os.chmod", "os.utime", "tempfile.mkstemp",
    "safetensors.torch.save_file", "yaml.dump", "yaml.safe_dump", "csv.writer", "csv.DictWriter",
})
_FILE_PREFIXES_READ = ("pandas.read_", "pd.read_")
_FILE_PREFIXES_WRITE = ("shutil.",)
_FILE_READ_METHODS = frozenset({"read_text", "read_bytes", "iterdir", "rglob", "is_file", "is_dir", "exists",
                                "from_pretrained", "read_csv", "read_parquet", "read_json"})
_FILE_WRITE_METHODS = frozenset({"write_text", "write_bytes", "mkdir", "unlink", "touch", "rmdir", "to_csv",
                                 "to_parquet", "to_json", "to_pickle", "savefig", "save", "save_pretrained",
                                 "write", "writelines", "dump", "to_file"})
# Library functions that return a view of an argument, or an object holding references to it.
_ALIASING_FUNCTIONS = frozenset({
    "torch.reshape", "torch.squeeze", "torch.unsqueeze", "torch.flatten", "torch.narrow", "torch.select",
    "torch.t", "torch.transpose", "torch.permute", "torch.unbind", "torch.chunk", "torch.split",
    "torch.tensor_split", "torch.as_tensor", "torch.from_numpy", "torch.view_as_real", "torch.view_as_complex",
    "torch.movedim", "torch.swapaxes", "torch.diagonal", "torch.broadcast_to", "torch.atleast_1d",
    "torch.atleast_2d", "torch.detach", "torch.nn.init", "torch.utils", "torch.func",
    "torch.compile", "torch.jit", "numpy.asarray", "numpy.asanyarray", "numpy.reshape", "numpy.ravel",
    "numpy.squeeze", "numpy.transpose", "numpy.split", "numpy.array_split", "numpy.atleast_1d",
    "numpy.atleast_2d", "numpy.broadcast_to", "numpy.frombuffer", "numpy.lib",
})


class EffectAnalyzer:
    """Infers and caches the effects of tasks and of the user's helper functions they call."""

    def __init__(self, project: Project) -> None:
        self.project = project
        self._cache: dict[int, Effects] = {}
        self._active: set[int] = set()

    def of_task(self, task: TaskDef) -> Effects:
        info = self.project.module(task.module)
        if info is None:  # pragma: no cover - a task always comes from a loaded module
            return Effects(world=Evidence(task.node.lineno, task.node.col_offset, "unknown module"))
        return self.of_function(task.node, info)

    def of_function(self, fn: ast.FunctionDef | ast.AsyncFunctionDef, info: ModuleInfo) -> Effects:
        key = id(fn)
        found = self._cache.get(key)
        if found is not None:
            return found
        if key in self._active:  # recursion: assume the worst for the cycle
            return Effects(world=Evidence(fn.lineno, fn.col_offset, "recursive call"))
        self._active.add(key)
        try:
            effects = _FunctionScan(self, fn, info).run()
        finally:
            self._active.discard(key)
        self._cache[key] = effects
        return effects


class _FunctionScan:
    """One pass over a function body: which locals may alias which parameters, then the evidence."""

    def __init__(self, analyzer: EffectAnalyzer, fn: ast.FunctionDef | ast.AsyncFunctionDef,
                 info: ModuleInfo) -> None:
        self.analyzer = analyzer
        self.fn = fn
        self.info = info
        self.effects = Effects()
        args = fn.args
        self.params = [a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)]
        if args.vararg:
            self.params.append(args.vararg.arg)
        if args.kwarg:
            self.params.append(args.kwarg.arg)
        annotations = {a.arg: ast.unparse(a.annotation) if a.annotation is not None else None
                       for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)}
        self.annotations = annotations
        # name -> parameters it may alias (scalars cannot be changed in place, so they alias nothing)
        self.alias: dict[str, set[str]] = {p: {p} for p in self.params if not is_scalar_type(annotations.get(p))}
        # the body only: decorators, annotations and defaults run once, when the function is defined
        self.body_nodes = [n for stmt in fn.body for n in ast.walk(stmt)]
        self.local_names = self._locals()
        self.new_containers = self._new_containers()
        self.global_decl = {n for node in self.body_nodes if isinstance(node, ast.Global) for n in node.names}

    # ---- aliasing ---------------------------------------------------------------------------------
    def _locals(self) -> set[str]:
        names: set[str] = set(self.params)
        for node in self.body_nodes:
            if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
                names.add(node.id)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node is not self.fn:
                names.add(node.name)
            elif isinstance(node, ast.alias):
                names.add((node.asname or node.name).split(".")[0])
            elif isinstance(node, ast.arg):
                names.add(node.arg)
        return names

    def _new_containers(self) -> set[str]:
        """Locals every assignment of which builds a new list/dict/set (`dict(x)`, `[...]`, `x.copy()`):
        storing into them changes no argument, though their items may still be shared."""
        fresh: dict[str, bool] = {}
        for node in self.body_nodes:
            targets: list[ast.expr] = []
            value: ast.expr | None = None
            if isinstance(node, ast.Assign):
                targets, value = node.targets, node.value
            elif isinstance(node, ast.AnnAssign) and node.value is not None:
                targets, value = [node.target], node.value
            elif isinstance(node, (ast.For, ast.AsyncFor, ast.withitem, ast.comprehension, ast.NamedExpr)):
                target = getattr(node, "target", None) or getattr(node, "optional_vars", None)
                for sub in ast.walk(target) if target is not None else ():
                    if isinstance(sub, ast.Name):
                        fresh[sub.id] = False
                continue
            for target in targets:
                if isinstance(target, ast.Name):
                    fresh[target.id] = fresh.get(target.id, True) and _builds_container(value)
                else:
                    for sub in ast.walk(target):
                        if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store):
                            fresh[sub.id] = False
        return {name for name, is_new in fresh.items() if is_new and name not in self.params}

    def roots(self, expr: ast.AST | None) -> set[str]:
        """Parameters whose objects `expr`'s value may share (the may-alias set)."""
        if expr is None:
            return set()
        if isinstance(expr, ast.Name):
            if expr.id in self.alias:
                return set(self.alias[expr.id])
            if self._is_global(expr.id):
                return {f"global:{self.info.name}.{expr.id}"}
            return set()
        if isinstance(expr, ast.Attribute):
            return set() if expr.attr in _SCALAR_ATTRS else self.roots(expr.value)
        if isinstance(expr, ast.Call):
            func = expr.func
            if isinstance(func, ast.Attribute) and func.attr in _FRESH_METHODS:
                return set()
            if isinstance(func, ast.Name) and func.id in _FRESH_BUILTINS and not self._shadowed(func.id):
                return set()
            name = self.qualified(func)
            if name is not None and self._fresh_library_result(name):
                return set()
            out = self.roots(func.value) if isinstance(func, ast.Attribute) and name is None else set()
            for arg in (*expr.args, *(k.value for k in expr.keywords)):
                out |= self.roots(arg)
            return out
        if isinstance(expr, (ast.Constant, ast.JoinedStr, ast.Compare, ast.Lambda)):
            return set()
        if isinstance(expr, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
            out = set()
            for gen in expr.generators:
                out |= self.roots(gen.iter)
            for part in (getattr(expr, "elt", None), getattr(expr, "key", None), getattr(expr, "value", None)):
                out |= self.roots(part)
            return out
        out = set()
        for child in ast.iter_child_nodes(expr):
            if isinstance(child, ast.expr):
                out |= self.roots(child)
        return out

    def _is_global(self, name: str) -> bool:
        if name in self.global_decl:
            return True
        if name in self.local_names:
            return False
        symbol = self.info.symbols.get(name)
        if isinstance(symbol, Constant):
            return isinstance(symbol.value, (list, dict, set))
        return isinstance(symbol, Opaque) and symbol.kind == "value"

    def _shadowed(self, name: str) -> bool:
        return name in self.local_names or name in self.info.symbols

    def _bind(self, target: ast.AST, roots: set[str]) -> bool:
        changed = False
        for node in ast.walk(target):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store) and roots:
                before = self.alias.setdefault(node.id, set())
                if not roots <= before:
                    before |= roots
                    changed = True
        return changed

    def _propagate(self) -> None:
        """Fixpoint of the may-alias sets over assignments, loops, `with` and comprehensions."""
        for _ in range(20):
            changed = False
            for node in self.body_nodes:
                if isinstance(node, ast.Assign):
                    roots = self.roots(node.value)
                    changed |= any(self._bind(t, roots) for t in node.targets)
                elif isinstance(node, (ast.AnnAssign, ast.NamedExpr)) and node.value is not None:
                    changed |= self._bind(node.target, self.roots(node.value))
                elif isinstance(node, (ast.For, ast.AsyncFor)):
                    changed |= self._bind(node.target, self.roots(node.iter))
                elif isinstance(node, ast.comprehension):
                    changed |= self._bind(node.target, self.roots(node.iter))
                elif isinstance(node, ast.withitem) and node.optional_vars is not None:
                    changed |= self._bind(node.optional_vars, self.roots(node.context_expr))
            if not changed:
                return

    # ---- evidence ---------------------------------------------------------------------------------
    def _mutated(self, roots: set[str], node: ast.AST, reason: str, direct: ast.expr | None = None) -> None:
        """Record a possible change of `roots`; certain when `direct` (the changed object) is a
        parameter itself or an attribute/item path into it."""
        certain = _path_root(direct) if direct is not None else None
        for root in sorted(roots):
            evidence = Evidence(node.lineno, node.col_offset, reason)  # type: ignore[attr-defined]
            if root.startswith("global:"):
                self.effects.globals_written.setdefault(root[7:], evidence)
            else:
                self.effects.mutates.setdefault(root, evidence)
                if certain == root:
                    self.effects.definite.setdefault(root, evidence)

    def _world(self, node: ast.AST, reason: str) -> None:
        if self.effects.world is None:
            self.effects.world = Evidence(node.lineno, node.col_offset, reason)  # type: ignore[attr-defined]

    def _file(self, node: ast.AST, reason: str, *, write: bool) -> None:
        evidence = Evidence(node.lineno, node.col_offset, reason)  # type: ignore[attr-defined]
        if write and self.effects.file_write is None:
            self.effects.file_write = evidence
        elif not write and self.effects.file_read is None:
            self.effects.file_read = evidence

    def _file_access(self, call: ast.Call, func: ast.expr, name: str | None) -> None:
        """Whether the call reads or writes files (conservatively: an `open` whose mode is not a
        literal writes)."""
        if isinstance(func, ast.Name) and func.id == "open" and not self._shadowed("open"):
            mode = call.args[1] if len(call.args) > 1 else next((k.value for k in call.keywords if k.arg == "mode"),
                                                               None)
            reads = mode is None or (isinstance(mode, ast.Constant) and isinstance(mode.value, str)
                                     and not set(mode.value) & set("wax+"))
            self._file(call, f"opens a file (`{ast.unparse(call)}`)", write=not reads)
        elif name is not None and (name in _FILE_WRITES or name.startswith(_FILE_PREFIXES_WRITE)):
            self._file(call, f"calls `{name}`", write=True)
        elif name is not None and (name in _FILE_READS or name.startswith(_FILE_PREFIXES_READ)):
            self._file(call, f"calls `{name}`", write=False)
        elif isinstance(func, ast.Attribute):  # `path.write_text(...)`, `plt.savefig(...)`, `f.write(...)`
            if func.attr in _FILE_WRITE_METHODS:
                self._file(call, f"calls `.{func.attr}()`", write=True)
            elif func.attr in _FILE_READ_METHODS or func.attr == "open":
                self._file(call, f"calls `.{func.attr}()`", write=func.attr == "open")

    def _rng(self, node: ast.AST, reason: str) -> None:
        if self.effects.rng is None:
            self.effects.rng = Evidence(node.lineno, node.col_offset, reason)  # type: ignore[attr-defined]

    def qualified(self, func: ast.expr) -> str | None:
        """`np.random.rand` → `numpy.random.rand`, following the module's imports; None if not a dotted name."""
        parts: list[str] = []
        while isinstance(func, ast.Attribute):
            parts.append(func.attr)
            func = func.value
        if not isinstance(func, ast.Name):
            return None
        head = func.id
        if head in self.local_names and head not in self.global_decl:
            return None
        symbol = self.info.symbols.get(head)
        if isinstance(symbol, ImportedModule):
            head = symbol.module
        elif isinstance(symbol, ImportedName):
            head = f"{symbol.module}.{symbol.name}"
        elif symbol is not None:
            return None if parts else None
        if head == "np":
            head = "numpy"
        return ".".join([head, *reversed(parts)])

    def run(self) -> Effects:
        self._propagate()
        for node in self.body_nodes:
            if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
                self._assignment(node)
            elif isinstance(node, ast.Call):
                self._call(node)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and self._is_global(node.id):
                self.effects.globals_read.add(f"{self.info.name}.{node.id}")
            elif isinstance(node, (ast.Yield, ast.YieldFrom, ast.Await)):
                self._world(node, "a generator or coroutine body")
        return self.effects

    def _assignment(self, node: ast.Assign | ast.AugAssign | ast.AnnAssign | ast.Delete) -> None:
        targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
        for target in targets:
            for sub in ast.walk(target):
                if isinstance(sub, (ast.Attribute, ast.Subscript)) and isinstance(sub.ctx, (ast.Store, ast.Del)):
                    if isinstance(sub.value, ast.Name) and sub.value.id in self.new_containers:
                        continue  # a container built here: its items change, no argument does
                    roots = self.roots(sub.value)
                    what = "assigns into" if not isinstance(node, ast.Delete) else "deletes from"
                    self._mutated(roots, sub, f"{what} `{ast.unparse(sub)}`", direct=sub.value)
            if isinstance(node, ast.AugAssign) and isinstance(target, ast.Name):
                if target.id in self.params and target.id in self.alias:
                    self._mutated({target.id}, target, f"updates `{target.id}` in place (`{ast.unparse(node).strip()}`)")
                elif target.id in self.global_decl:
                    self._mutated({f"global:{self.info.name}.{target.id}"}, target,
                                  f"rebinds the global `{target.id}`")
            elif isinstance(target, ast.Name) and target.id in self.global_decl and not isinstance(node, ast.Delete):
                self._mutated({f"global:{self.info.name}.{target.id}"}, target, f"rebinds the global `{target.id}`")

    def _call(self, call: ast.Call) -> None:
        func = call.func
        name = self.qualified(func)
        args = [*call.args, *(k.value for k in call.keywords)]
        kwargs = {k.arg for k in call.keywords}
        self._file_access(call, func, name)
        # the global RNG
        if name is not None and self._uses_rng(name, call):
            self._rng(call, f"`{ast.unparse(func)}` uses the global random number generator")
            if name in _SEEDING:
                self.effects.seeds = True
        # calling a parameter (a module's forward, a callback)
        if isinstance(func, ast.Name) and func.id in self.alias:
            self._mutated(self.roots(func), call, f"calls `{func.id}`, which may change its state")
        # method calls on an alias
        if isinstance(func, ast.Attribute) and name is None:
            roots = self.roots(func.value)
            if (isinstance(func.value, ast.Name) and func.value.id in self.new_containers
                    and func.attr in _CONTAINER_METHODS):
                roots = set()  # `new = list(xs); new.append(v)`: the new list changes, not `xs`
            if func.attr in _CONVERSIONS:  # `.to()`, `.half()`: a copy of a tensor, in place on a module
                roots = {r for r in roots if not _is_data_annotation(self.annotations.get(r))}
            if roots and not (func.attr in _READ_METHODS and not (kwargs & _MUTATING_KWARGS)):
                known = func.attr in _KNOWN_MUTATORS or (func.attr.endswith("_") and not func.attr.endswith("__"))
                self._mutated(roots, call, f"calls `.{func.attr}()` on `{ast.unparse(func.value)}`",
                              direct=func.value if known else None)
            elif not roots and func.attr.endswith("_") and not func.attr.endswith("__"):
                pass  # in place on a local object
            if func.attr in ("write", "writelines", "flush", "send", "sendall", "put", "emit", "log",
                             "save", "savefig", "add_scalar", "info", "warning", "debug", "error"):
                self._world(call, f"calls `.{func.attr}()`")
            return self._arguments(call, args, pure=True)
        if isinstance(func, ast.Name) and not self._shadowed(func.id):  # a builtin
            if func.id in _WORLD_BUILTINS:
                self._world(call, f"calls `{func.id}()`")
                if func.id in ("setattr", "delattr") and call.args:
                    self._mutated(self.roots(call.args[0]), call, f"calls `{func.id}()` on it")
                return
            if func.id in ("next",):
                for arg in call.args[:1]:
                    self._mutated(self.roots(arg), call, "advances it with `next()`")
                return
            if func.id in _PURE_BUILTINS or func.id.endswith(("Error", "Exception", "Warning")):
                return  # (raising is not an effect: a removed call that would fail is not kept for it)
        # a helper of the user's own
        helper = self._helper(func)
        if helper is not None:
            fn, info = helper
            inner = self.analyzer.of_function(fn, info)
            self._apply_helper(call, fn, inner)
            return
        if isinstance(func, ast.Name) and func.id in self.local_names:
            # a local callable (a lambda, a nested def, a model built here): effects stay local
            return self._arguments(call, args, pure=func.id not in self.alias)
        if name is not None:
            pure_lib = (any(name == m or name.startswith(m + ".") for m in _PURE_MODULES)
                        and not any(name == f or name.startswith(f + ".") for f in _IMPURE_FUNCTIONS)
                        and not (name.rsplit(".", 1)[-1].endswith("_") and not name.endswith("__"))
                        and not (kwargs & _MUTATING_KWARGS))
            if any(name.startswith(p) for p in _WORLD_PREFIXES) or name in _IMPURE_FUNCTIONS or any(
                    name.startswith(f + ".") for f in _IMPURE_FUNCTIONS):
                if not name.startswith(("os.path.join", "os.path.basename", "os.path.dirname", "os.path.splitext",
                                        "os.path.abspath", "os.path.normpath", "os.environ.get", "os.getenv",
                                        "os.cpu_count", "sys.getsizeof")):
                    self._world(call, f"calls `{name}`")
            if name.startswith("torch.nn.") and name.rsplit(".", 1)[-1][:1].isupper():
                return  # a layer or loss constructor keeps references but changes nothing
            if name.startswith("torch.optim.") or name.startswith("torch.utils.data."):
                return
            if pure_lib or self._rng_only(name):
                return
            self._world(call, f"calls `{name}`, which dagc does not know")
            return self._arguments(call, args, pure=False)
        self._world(call, f"calls `{ast.unparse(func)}`, which dagc does not know")
        self._arguments(call, args, pure=False)

    def _fresh_library_result(self, name: str) -> bool:
        """A library function whose result is a new object (torch.cat, F.cross_entropy, np.mean), not
        a view of, or a container holding, its arguments."""
        if any(name == f or name.startswith(f + ".") for f in _ALIASING_FUNCTIONS):
            return False
        last = name.rsplit(".", 1)[-1]
        if last[:1].isupper():  # a class: the object may keep references to its arguments
            return False
        return name.startswith(("torch.", "numpy.", "math.", "statistics.", "json.", "pickle.", "hashlib.",
                                "base64.", "copy.deepcopy"))

    def _rng_only(self, name: str) -> bool:
        return name.startswith(_RNG_PREFIXES) or name in _RNG_FUNCTIONS

    def _arguments(self, call: ast.Call, args: list[ast.expr], *, pure: bool) -> None:
        if pure:
            return
        for arg in args:
            roots = self.roots(arg)
            if roots:
                what = ast.unparse(call.func)
                self._mutated(roots, arg, f"passes `{ast.unparse(arg)}` to `{what}`, which dagc does not know")

    def _uses_rng(self, name: str, call: ast.Call) -> bool:
        if name in _RNG_EXEMPT:
            return False
        if any(k.arg == "generator" for k in call.keywords):
            return False
        if name in _RNG_FUNCTIONS or name.startswith(_RNG_PREFIXES):
            return True
        last = name.rsplit(".", 1)[-1]
        return name.startswith("torch.nn.") and last in _RNG_LAYERS

    def _helper(self, func: ast.expr) -> tuple[ast.FunctionDef | ast.AsyncFunctionDef, ModuleInfo] | None:
        """A plain function or task of the user's own modules that `func` names, with its module."""
        project = self.analyzer.project
        if isinstance(func, ast.Name) and func.id not in self.local_names:
            symbol = project.lookup(self.info, func.id)
            return _function_of(symbol, project, self.info)
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
            symbol = self.info.symbols.get(func.value.id)
            if isinstance(symbol, ImportedModule) and project.is_user_module(symbol.module):
                module = project.module(symbol.module)
                if module is not None:
                    return _function_of(project.lookup(module, func.attr), project, module)
        return None

    def _apply_helper(self, call: ast.Call, fn: ast.FunctionDef | ast.AsyncFunctionDef, inner: Effects) -> None:
        where = f"`{ast.unparse(call.func)}`"
        if inner.world is not None:
            self._world(call, f"calls {where}, which {inner.world.reason}")
        if inner.rng is not None:
            self._rng(call, f"calls {where}, which uses the global random number generator")
        for evidence, write in ((inner.file_read, False), (inner.file_write, True)):
            if evidence is not None:
                self._file(call, f"calls {where}, which {evidence.reason}", write=write)
        self.effects.seeds = self.effects.seeds or inner.seeds
        for name, evidence in inner.globals_written.items():
            self.effects.globals_written.setdefault(name, Evidence(call.lineno, call.col_offset,
                                                                   f"calls {where}, which {evidence.reason}"))
        self.effects.globals_read |= inner.globals_read
        params = [a.arg for a in (*fn.args.posonlyargs, *fn.args.args)]
        if fn.name == "__init__":
            params = params[1:]  # a class of the user's: `self` is the new object
        bound: dict[str, ast.expr] = dict(zip(params, call.args))
        bound.update((k.arg, k.value) for k in call.keywords if k.arg is not None)
        star = any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords)
        for param, arg in bound.items():
            if param in inner.mutates or star or (fn.args.vararg and len(call.args) > len(params)):
                if param in inner.mutates or star:
                    self._mutated(self.roots(arg), arg, f"passes `{ast.unparse(arg)}` to {where}, which "
                                  f"{inner.mutates[param].reason if param in inner.mutates else 'takes *args'}")


def _builds_container(value: ast.expr | None) -> bool:
    if isinstance(value, (ast.List, ast.Dict, ast.Set, ast.ListComp, ast.DictComp, ast.SetComp)):
        return True
    if isinstance(value, ast.Call):
        func = value.func
        if isinstance(func, ast.Name) and func.id in ("dict", "list", "set", "sorted", "OrderedDict", "defaultdict"):
            return True
        if isinstance(func, ast.Attribute) and func.attr == "copy" and not value.args:
            return True
        if isinstance(func, ast.Attribute) and func.attr in ("copy", "deepcopy") and isinstance(func.value, ast.Name) \
                and func.value.id == "copy":
            return True
    return False


def _function_of(symbol: object, project: Project, info: ModuleInfo,
                 ) -> tuple[ast.FunctionDef | ast.AsyncFunctionDef, ModuleInfo] | None:
    if isinstance(symbol, TaskDef):
        module = project.module(symbol.module)
        return (symbol.node, module) if module is not None else None
    if isinstance(symbol, Opaque) and symbol.kind == "function" and isinstance(
            symbol.node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        # the symbol's module: the one whose tree holds the node
        for module in _loaded_modules(project):
            if module.symbols.get(symbol.node.name) is symbol:
                return symbol.node, module
        return symbol.node, info
    if isinstance(symbol, Opaque) and symbol.kind == "class" and isinstance(symbol.node, ast.ClassDef):
        # constructing one of the user's classes runs its __init__ (no __init__: effects of object())
        init = next((s for s in symbol.node.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))
                     and s.name == "__init__"), None)
        if init is None:
            init = ast.FunctionDef("__init__", ast.arguments([], [ast.arg("self")], None, [], [], None, []),
                                   [ast.Pass()], [], None, lineno=symbol.node.lineno,
                                   col_offset=symbol.node.col_offset)
        owner = next((m for m in _loaded_modules(project) if m.symbols.get(symbol.node.name) is symbol), info)
        return init, owner
    return None


def _loaded_modules(project: Project) -> list[ModuleInfo]:
    modules = getattr(project, "_modules", None) or getattr(project, "modules", None) or {}
    return [m for m in (modules.values() if isinstance(modules, dict) else modules) if m is not None]
