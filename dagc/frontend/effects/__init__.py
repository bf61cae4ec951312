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

Modules: `summary` (`Effects`, `Evidence`), `analyzer` (`EffectAnalyzer`: one summary per task, helper and
method, kept), `scan` (one pass over a function body: aliases, assignments, files, the global generator),
`calls` (what each call in it does), `lookup` (where a called name is defined).
"""

from dagc.frontend.effects.analyzer import EffectAnalyzer
from dagc.frontend.effects.summary import SCALAR_TYPES, Effects, Evidence, is_scalar_type

__all__ = ["Effects", "Evidence", "EffectAnalyzer", "SCALAR_TYPES", "is_scalar_type"]
