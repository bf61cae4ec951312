"""The effects of the calls in a function body: library functions by their catalogue, the user's helpers by
their own summaries, methods by their receiver."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from dagc.frontend import library as lib
from dagc.frontend.effects.lookup import function_of
from dagc.frontend.effects.summary import Effects, Evidence, is_data_annotation
from dagc.frontend.modules import ImportedModule, ModuleInfo
from dagc.frontend.values import GlobalValue

if TYPE_CHECKING:
    from dagc.frontend.effects.scan import FunctionScan


def scan_call(scan: FunctionScan, call: ast.Call) -> None:
    func = call.func
    name = scan.qualified(func)
    args = [*call.args, *(k.value for k in call.keywords)]
    scan.file_access(call, func, name)
    # the global RNG
    if name is not None and _uses_rng(scan, name, call):
        scan.rng(call, f"`{ast.unparse(func)}` uses the global random number generator",
                 advances=_only_advances(name, call))
        if name in lib.SEEDING:
            scan.effects.seeds = True
    if isinstance(func, ast.Name):
        if func.id in scan.alias:  # calling a parameter (a module's forward, a callback)
            if not scan.evaluation_only(func.id):  # in evaluation mode a forward pass changes nothing
                scan.mutated(scan.roots(func), call, f"calls `{func.id}`, which may change its state (a module "
                             "in training mode updates its batch-norm running statistics)")
            cls = scan.user_class(scan.annotations.get(func.id))
            if cls is not None and not scan.evaluation_only(func.id) and scan.analyzer.forward_draws(*cls):
                scan.rng(call, f"calls `{func.id}`, a `{cls[0].name}` whose layers draw random numbers "
                          "(dropout) when called in training mode")
        else:
            value = scan.global_value(func.id)
            if value is not None:
                return _call_global(scan, call, func.id, value, args)
    if isinstance(func, ast.Attribute) and name is None:
        return _method_call(scan, call, func, args)
    if isinstance(func, ast.Name) and not scan.shadowed(func.id):  # a builtin
        if func.id == "print":
            target = next((k.value for k in call.keywords if k.arg == "file"), None)
            if target is None or ast.unparse(target) in lib.OUTPUT_STREAMS:
                _output(scan, call, "prints")
            else:
                scan.file(call, f"prints to `{ast.unparse(target)}`", write=True)
            return
        if func.id in ("setattr", "delattr"):
            if call.args:
                scan.mutated(scan.roots(call.args[0]), call, f"calls `{func.id}()` on it")
            return
        if func.id == "open" and scan.reads_only(call):
            return  # a file opened for reading: the run records it and checks it before reuse (filetrace)
        if func.id in lib.WORLD_BUILTINS:
            scan.world(call, f"calls `{func.id}()`")
            return
        if func.id in ("next",):
            for arg in call.args[:1]:
                scan.mutated(scan.roots(arg), call, "advances it with `next()`")
            return
        if func.id in lib.PURE_BUILTINS or func.id.endswith(("Error", "Exception", "Warning")):
            return  # (raising is not an effect: a removed call that would fail is not kept for it)
    # a helper of the user's own
    helper = _helper(scan, func)
    if helper is not None:
        fn, info = helper
        if id(fn) not in scan.analyzer.code_of:
            owner = fn.name if fn.name != "__init__" else ast.unparse(func).rpartition(".")[2]
            task = next((t for t in info.tasks.values() if t.node is fn), None)
            scan.analyzer.code_of[id(fn)] = f"{info.name}:{task.qualname if task is not None else owner}"
        inner = scan.analyzer.of_function(fn, info)
        _apply_helper(scan, call, fn, inner)
        return
    if isinstance(func, ast.Name) and func.id in scan.local_names and func.id not in scan.local_imports:
        cls = scan.user_class(scan.annotations.get(func.id)) if func.id in scan.alias else None
        forward = next((m for m in cls[0].body if isinstance(m, ast.FunctionDef)
                        and m.name in ("forward", "__call__")), None) if cls is not None else None
        if forward is not None and cls is not None:  # `model(x)` with `model: Net`: Net.forward, read
            scan.analyzer.code_of.setdefault(id(forward), f"{cls[1].name}:{cls[0].name}")
            _apply_helper(scan, call, forward, scan.analyzer.of_function(forward, cls[1]), receiver=func)
            return None
        # a local callable (a lambda, a nested def, a model built here): effects stay local; a parameter called
        # (a forward pass `model(x)`) reads its arguments
        return None
    if name is not None:
        return _library_call(scan, call, name, args)
    scan.world(call, f"calls `{ast.unparse(func)}`, which dagc does not know")
    _arguments(scan, call, args, pure=False)


def _call_global(scan: FunctionScan, call: ast.Call, name: str, value: GlobalValue, args: list[ast.expr]) -> None:
    """Calling a module-level object: a loss or activation layer holding nothing changes nothing; a
    logger or progress bar outputs; anything else may change itself and its arguments."""
    if value.kind == "output":
        return _output(scan, call, f"calls `{name}`")
    if value.kind == "layer" and value.layer is not None and value.layer.stateless:
        if value.layer.forward_rng:
            scan.rng(call, f"calls `{name}` ({value.constructor}), which draws random numbers")
        return
    if value.kind == "immutable":
        return
    cls = None
    if value.kind == "mutable" and value.constructor is not None:  # `Net`, or `model.GPT` imported as `GPT`
        cls = scan.user_class(value.constructor) or scan.user_class(value.constructor.rpartition(".")[2])
    if cls is not None and any(isinstance(m, ast.FunctionDef) and m.name in ("forward", "__call__")
                               for m in cls[0].body):
        # `model(x)` of a module-level `model = GPT(config)` (nanoGPT): a forward pass, as of a parameter
        # annotated with its class: it reads its arguments, may change the model (batch-norm statistics in
        # training mode), and draws where its layers do (dropout)
        if not scan.evaluation_only(name):
            scan.mutated({f"global:{scan.info.name}.{name}"}, call, f"calls `{name}`, which may change its state (a "
                         "module in training mode updates its batch-norm running statistics)")
            if scan.analyzer.forward_draws(*cls):
                scan.rng(call, f"calls `{name}`, a module-level `{cls[0].name}` whose layers draw random numbers "
                         "(dropout) when called in training mode")
        return
    if value.kind == "mutable" and value.constructor is not None and _library_object(scan, value.constructor):
        return  # a library's object built at module level (a tokenizer, a vectorizer): calling it reads it
    scan.mutated({f"global:{scan.info.name}.{name}"}, call, f"calls `{name}`, which may change its state")
    if value.kind != "layer":
        scan.world(call, f"calls `{name}`, which dagc does not know")
        _arguments(scan, call, args, pure=False)


def _method_call(scan: FunctionScan, call: ast.Call, func: ast.Attribute, args: list[ast.expr]) -> None:
    receiver = func.value
    kwargs = {k.arg for k in call.keywords}
    if isinstance(receiver, ast.Name) and (value := scan.global_value(receiver.id)) is not None \
            and value.kind == "output":
        return _output(scan, call, f"calls `{ast.unparse(func)}`")  # a module-level logger, bar or writer
    roots = scan.roots(receiver)
    if isinstance(receiver, ast.Name) and receiver.id in scan.new_containers and func.attr in lib.CONTAINER_METHODS:
        roots = set()  # `new = list(xs); new.append(v)`: the new list changes, not `xs`
    if func.attr in lib.CONVERSIONS:  # `.to()`, `.half()`: a copy of a tensor, in place on a module
        roots = {r for r in roots if not is_data_annotation(scan.annotations.get(r))}
        if _moves_device(scan, call, func.attr):
            roots = set()  # a move between devices keeps every value: it changes no result
    if roots and changes_receiver(call, func.attr):
        known = func.attr in lib.KNOWN_MUTATORS or (func.attr.endswith("_") and not func.attr.endswith("__"))
        scan.mutated(roots, call, f"calls `.{func.attr}()` on `{ast.unparse(receiver)}`",
                      direct=receiver if known else None)
    if func.attr in lib.SHUFFLES and call.args:  # `rng.shuffle(xs)`: the argument is shuffled in place
        scan.mutated(scan.roots(call.args[0]), call.args[0], f"`.{func.attr}()` shuffles "
                     f"`{ast.unparse(call.args[0])}` in place", direct=call.args[0])
    if lib.catalogue().method_draws(func.attr) and "generator" not in kwargs:
        scan.rng(call, f"`.{func.attr}()` uses the global random number generator")
    if func.attr.startswith(("fit", "partial_fit")) and isinstance(receiver, ast.Name):
        _fit_elsewhere(scan, call, func.attr, receiver.id)
    if func.attr in lib.LOG_METHODS:
        _output(scan, call, f"calls `.{func.attr}()`")
    elif func.attr in lib.WORLD_METHODS:
        scan.world(call, f"calls `.{func.attr}()`")
    # a method of one of the user's own classes (any class defining it: the receiver's class is not known)
    for fn, module, static in scan.analyzer.methods_named(func.attr):
        inner = scan.analyzer.of_function(fn, module)
        _apply_helper(scan, call, fn, inner, receiver=None if static else receiver)
    _arguments(scan, call, args, pure=True)


def _fit_elsewhere(scan: FunctionScan, call: ast.Call, method: str, receiver: str) -> None:
    """`model.fit(X, y)` of an estimator the task was given (`model: RandomForestClassifier`, or the class
    the task that made it returns): whether it was given `random_state` is not seen here, and scikit-learn
    draws at the fit, not at the constructor: the fit may draw from numpy's global generator."""
    if receiver not in scan.params or receiver in scan.rebound:
        return
    annotation = scan.annotations.get(receiver)
    if not annotation:
        return
    try:
        expr = ast.parse(annotation, mode="eval").body
    except SyntaxError:
        return
    name = scan.qualified(expr)
    known = lib.catalogue().library_function(name) if name is not None else None
    if known is None or not known.estimator or not (known.rng or known.rng_unless):
        return
    scan.rng(call, f"`.{method}()` fits `{receiver}`, a `{annotation}` made by another task: unless that gave it "
                   f"`{known.rng_unless or 'random_state'}`, scikit-learn draws from numpy's global generator here",
             advances=known.rng_advances)


def changes_receiver(call: ast.Call, method: str) -> bool:
    """Whether method `method` may change the object it is called on: a known mutator (`append`, `step`,
    `train`), an in-place tensor method (`add_`, torch's schemas), a method numpy, pandas or scikit-learn
    says changes its receiver (`sort`, `fit`, `set_params`, `pop`), one given `inplace=True` or `out=`. Any
    other method reads it (a library object's unknown method included: the run-time check is the
    backstop); the user's own methods are read by their own summaries."""
    if method in lib.KNOWN_MUTATORS or method in lib.STATEFUL_METHODS or (
            method.endswith("_") and not method.endswith("__")):
        return True
    if method.startswith("set_") and method not in lib.OUTPUT_METHODS:  # a setter (`sampler.set_epoch(e)`)
        return True
    if lib.catalogue().method_writes_self(method):
        return True
    for keyword in call.keywords:
        if keyword.arg == "out" or keyword.arg == "inplace" and not (
                isinstance(keyword.value, ast.Constant) and keyword.value.value in (False, None)):
            return True
    facts = lib.catalogue().method(method)
    return facts is not None and facts.changes_self


def _library_object(scan: FunctionScan, constructor: str) -> bool:
    """A module-level object built by a library's function or class, not the user's own (whose `__call__`
    may change it) nor a torch layer (which batch-norm statistics change)."""
    head = constructor.split(".")[0]
    project = scan.analyzer.project
    if scan.user_class(constructor) is not None or scan.user_class(constructor.rpartition(".")[2]) is not None:
        return False  # a class of the user's (`Net()`): its methods are the user's
    return not constructor.startswith("torch.") and not project.is_user_module(head) and not any(
        project.is_user_module(constructor.rsplit(".", k)[0]) for k in range(1, constructor.count(".") + 1))


def _moves_device(scan: FunctionScan, call: ast.Call, method: str) -> bool:
    """`.cuda()`, `.cpu()`, `.to(device)`: a move that keeps every value (not `.to(torch.float16)`)."""
    if method in ("cuda", "cpu"):
        return not any(k.arg in ("dtype", "memory_format") for k in call.keywords)
    if method != "to" or len(call.args) > 1 or any(k.arg not in ("device", "non_blocking") for k in call.keywords):
        return False
    target = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "device"), None)
    return target is not None and _is_device(scan, target)


def _is_device(scan: FunctionScan, expr: ast.expr) -> bool:
    if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
        return expr.value.split(":")[0] in lib.DEVICE_TYPES
    if isinstance(expr, ast.Attribute) and expr.attr == "device":
        return True
    if isinstance(expr, ast.Call):
        return scan.qualified(expr.func) == "torch.device"
    if isinstance(expr, ast.IfExp):
        return _is_device(scan, expr.body) and _is_device(scan, expr.orelse)
    if isinstance(expr, ast.Name):
        value = scan.global_value(expr.id)
        if value is not None:
            return value.device
        annotation = scan.annotations.get(expr.id) or ""
        return "device" in annotation or expr.id in ("device", "dev") or expr.id.endswith("_device")
    return False


def _library_call(scan: FunctionScan, call: ast.Call, name: str, args: list[ast.expr]) -> None:
    kwargs = {k.arg for k in call.keywords}
    if lib.is_varying_function(name):
        scan.varies(call, f"calls `{name}()`")
    if lib.is_no_effect_function(name):
        return
    if lib.is_output_function(name):
        return _output(scan, call, f"calls `{name}`")
    if call.args and any(k.arg == "copy" and isinstance(k.value, ast.Constant) and k.value.value is False
                         for k in call.keywords):  # `np.nan_to_num(x, copy=False)`, `normalize(X, copy=False)`
        arg = call.args[0]
        scan.mutated(scan.roots(arg), arg, f"passes `{ast.unparse(arg)}` to `{name}` with `copy=False`, which may "
                     "change it in place", direct=arg)
    if name.startswith("numpy.") and name.endswith(".at") and call.args:  # a ufunc's `at` (`np.add.at(a, i, 1)`)
        arg = call.args[0]
        scan.mutated(scan.roots(arg), arg, f"`{name}` changes `{ast.unparse(arg)}` in place", direct=arg)
    known = lib.catalogue().library_function(name)
    if known is not None:  # numpy, pandas, scikit-learn: what their metadata says they write
        for index in known.mutates:
            if index < len(call.args):
                arg = call.args[index]
                if isinstance(arg, ast.Name) and arg.id in scan.new_containers:
                    continue  # `shuffle(movies)` of a list built here: the new list changes, not its items' owners
                scan.mutated(scan.roots(arg), arg, f"passes `{ast.unparse(arg)}` to `{name}`, which "
                             "changes it in place", direct=arg)
        for k in call.keywords:
            if k.arg == "out" and known.out:
                scan.mutated(scan.roots(k.value), k.value, f"`{name}` writes `out=`", direct=k.value)
        if known.seeds:
            scan.effects.seeds = True
    if name.startswith("torch."):
        facts = lib.catalogue().function(name)
        if facts is not None:  # what torch's schemas say the function writes
            for index in facts.mutates:
                if index < len(call.args):
                    arg = call.args[index]
                    scan.mutated(scan.roots(arg), arg, f"passes `{ast.unparse(arg)}` to `{name}`, which "
                                  "changes it in place", direct=arg)
            for k in call.keywords:
                if k.arg == "out" and facts.out:
                    scan.mutated(scan.roots(k.value), k.value, f"`{name}` writes `out=`", direct=k.value)
            return
    if name.startswith(lib.NATIVE_FILE_READERS):  # opens files where the run's record cannot see them
        scan.world(call, f"calls `{name}`, which reads files in native code (not recorded at run time)")
        return
    if name in lib.TRACED_READS or name.startswith(lib.FILE_PREFIXES_READ):
        return  # reads files: recorded when it runs and checked before its output is reused
    pure_lib = (any(name == m or name.startswith(m + ".") for m in lib.PURE_MODULES)
                and not any(name == f or name.startswith(f + ".") for f in lib.IMPURE_FUNCTIONS)
                and not (name.rsplit(".", 1)[-1].endswith("_") and not name.endswith("__"))
                and not (kwargs & lib.MUTATING_KWARGS))
    if any(name.startswith(p) for p in lib.WORLD_PREFIXES) or name in lib.IMPURE_FUNCTIONS or any(
            name.startswith(f + ".") for f in lib.IMPURE_FUNCTIONS):
        scan.world(call, f"calls `{name}`")
    if name.startswith("torch.nn.") and name.rsplit(".", 1)[-1][:1].isupper():
        return  # a layer or loss constructor keeps references but changes nothing
    if name.startswith("torch.optim.") or name.startswith("torch.utils.data.") or lib.is_output_constructor(name):
        return
    if pure_lib or _rng_only(scan, name) or known is not None:
        return
    # any other library function reads its arguments and returns a value (the run-time check of effects,
    # on for every backend, stops a run where one did more)
    return


def fresh_library_result(scan: FunctionScan, name: str) -> bool:
    """A library function whose result is a new object (torch.cat, F.cross_entropy, np.mean), not
    a view of, or a container holding, its arguments."""
    if any(name == f or name.startswith(f + ".") for f in lib.ALIASING_FUNCTIONS):
        return False
    if name.split(".")[0] in lib.catalogue().copy_on_write:  # pandas: every derived object behaves as a copy
        return True
    last = name.rsplit(".", 1)[-1]
    if last[:1].isupper():  # a class: the object may keep references to its arguments
        return False
    return name.startswith(lib.FRESH_RESULT_PREFIXES)


def _rng_only(scan: FunctionScan, name: str) -> bool:
    return name.startswith(lib.RNG_PREFIXES) or name in lib.RNG_FUNCTIONS


def _output(scan: FunctionScan, node: ast.AST, reason: str) -> None:
    if scan.effects.output is None:
        scan.effects.output = Evidence.at(node, reason)


def _arguments(scan: FunctionScan, call: ast.Call, args: list[ast.expr], *, pure: bool) -> None:
    if pure:
        return
    for arg in args:
        roots = scan.roots(arg)
        if roots:
            what = ast.unparse(call.func)
            scan.mutated(roots, arg, f"passes `{ast.unparse(arg)}` to `{what}`, which dagc does not know")


def _uses_rng(scan: FunctionScan, name: str, call: ast.Call) -> bool:
    if name in lib.RNG_EXEMPT:
        return False
    if any(k.arg == "generator" for k in call.keywords):
        return False
    if name in lib.RNG_FUNCTIONS or name.startswith(lib.RNG_PREFIXES):
        return True
    known = lib.catalogue().library_function(name)
    if known is not None and (known.rng or known.rng_unless):
        # `train_test_split(X, y)`, `RandomForestClassifier()`: numpy's global generator unless given a seed
        if known.rng_unless_false and any(k.arg == known.rng_unless_false and isinstance(k.value, ast.Constant)
                                          and k.value.value is False for k in call.keywords):
            return False
        given = next((k.value for k in call.keywords if k.arg == known.rng_unless), None)
        return known.rng or given is None or isinstance(given, ast.Constant) and given.value is None
    if not name.startswith("torch."):
        return False
    catalogue = lib.catalogue()
    facts = catalogue.function(name)
    if facts is not None:
        return facts.rng
    # a layer whose constructor draws its initial weights, or whose forward draws (dropout), when it
    # is built in the task that calls it
    layer = catalogue.layer(name)
    return layer is not None and (layer.init_rng or layer.forward_rng)


def _only_advances(name: str, call: ast.Call) -> bool:
    """The call draws from the global generator, but what it computes does not depend on the draw
    (`SVC()`: libsvm seeds probability estimates only): it changes what later draws give, nothing else."""
    known = lib.catalogue().library_function(name)
    if known is None or not known.rng_advances:
        return False
    given = next((k.value for k in call.keywords if k.arg == known.rng_depends_if), None)
    return given is None or isinstance(given, ast.Constant) and not given.value


def _helper(scan: FunctionScan, func: ast.expr) -> tuple[ast.FunctionDef | ast.AsyncFunctionDef, ModuleInfo] | None:
    """A plain function or task of the user's own modules that `func` names, with its module."""
    project = scan.analyzer.project
    if isinstance(func, ast.Name) and func.id not in scan.local_names:
        symbol = project.lookup(scan.info, func.id)
        return function_of(symbol, project, scan.info)
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
        symbol = scan.info.symbols.get(func.value.id)
        if isinstance(symbol, ImportedModule) and project.is_user_module(symbol.module):
            module = project.module(symbol.module)
            if module is not None:
                return function_of(project.lookup(module, func.attr), project, module)
    return None


def _apply_helper(scan: FunctionScan, call: ast.Call, fn: ast.FunctionDef | ast.AsyncFunctionDef, inner: Effects,
                  receiver: ast.expr | None = None) -> None:
    where = f"`{ast.unparse(call.func)}`"
    if inner.world is not None:
        scan.world(call, f"calls {where}, which {inner.world.reason}")
    if inner.output is not None:
        _output(scan, call, f"calls {where}, which {inner.output.reason}")
    code = scan.analyzer.code_of.get(id(fn))
    if code is not None:
        scan.effects.reaches.add(code)
    scan.effects.reaches |= inner.reaches
    if inner.rng is not None:
        scan.rng(call, f"calls {where}, which uses the global random number generator", advances=not inner.rng_depends)
    if inner.varies is not None:
        scan.varies(call, f"calls {where}, which {inner.varies.reason}")
    params_in_order = [a.arg for a in (*fn.args.posonlyargs, *fn.args.args)]
    if fn.name == "__init__" or receiver is not None:
        params_in_order = params_in_order[1:]
    given = dict(zip(params_in_order, call.args))
    given.update((k.arg, k.value) for k in call.keywords if k.arg is not None)
    for evidence, write in ((inner.file_read, False), (inner.file_write, True)):
        if evidence is None:
            continue
        reason = f"calls {where}, which {evidence.reason}"
        terms = inner.file_paths["write" if write else "read"]
        if not inner.file_paths_known:
            scan.file(call, reason, write=write)  # a path the helper does not name: unknown here too
        for term in sorted(terms):
            if term.startswith("param:"):  # the helper's parameter: what this call passes
                scan.file(call, reason, write=write, path=given.get(term[len("param:"):]))
            else:
                scan.file(call, reason, write=write, path=term)
    scan.effects.seeds = scan.effects.seeds or inner.seeds
    for name, evidence in inner.globals_written.items():
        scan.effects.globals_written.setdefault(name, Evidence.at(
            call, f"calls {where}, which {evidence.reason}"))
    scan.effects.globals_read |= inner.globals_read
    params = [a.arg for a in (*fn.args.posonlyargs, *fn.args.args)]
    bound: dict[str, ast.expr] = {}
    if fn.name == "__init__":
        params = params[1:]  # a class of the user's: `self` is the new object
    elif receiver is not None and params:
        bound[params[0]] = receiver  # a method: `self` is the object it is called on
        params = params[1:]
    bound.update(zip(params, call.args))
    bound.update((k.arg, k.value) for k in call.keywords if k.arg is not None)
    star = any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords)
    for param, arg in bound.items():
        if param in inner.mutates or star or (fn.args.vararg and len(call.args) > len(params)):
            if param in inner.mutates or star:
                scan.mutated(scan.roots(arg), arg, f"passes `{ast.unparse(arg)}` to {where}, which "
                              f"{inner.mutates[param].reason if param in inner.mutates else 'takes *args'}")
