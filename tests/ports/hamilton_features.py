"""A Hamilton feature dataflow (in the style of Hamilton's `hello_world` and feature-engineering
examples), ported to dagc.

Kept as Hamilton users write it: small functions named after the column they compute, each taking the
columns it needs as parameters; a module-level config dict read inside the functions; pandas-free here,
lists of floats stand for series. Changed: each function is a `@dagc.task`; the Hamilton driver's
`execute([...])` is a pipeline that calls them (dagc finds the independent branches).
"""

import math
import statistics

import dagc

CONFIG = {"window": 3, "clip": 4.0, "scale": 100.0}


@dagc.task(cost="2s")
def spend(n: int) -> list:
    return [round(10 + 5 * math.sin(i / 3) + i * 0.5, 4) for i in range(n)]


@dagc.task(cost="2s")
def signups(n: int) -> list:
    return [round(1 + abs(math.cos(i / 4)) * 3 + i * 0.1, 4) for i in range(n)]


@dagc.task(cost="5s")
def avg_3wk_spend(spend: list) -> list:
    w = CONFIG["window"]
    return [round(statistics.fmean(spend[max(0, i - w + 1):i + 1]), 4) for i in range(len(spend))]


@dagc.task(cost="5s")
def spend_per_signup(spend: list, signups: list) -> list:
    return [round(s / u, 4) for s, u in zip(spend, signups)]


@dagc.task(cost="5s")
def spend_zero_mean_unit_variance(spend: list) -> list:
    mean, std = statistics.fmean(spend), statistics.pstdev(spend)
    out = [(s - mean) / std for s in spend]
    for i, value in enumerate(out):  # clip in place, as a pandas user would with .clip(inplace=True)
        out[i] = round(max(-CONFIG["clip"], min(CONFIG["clip"], value)), 4)
    return out


@dagc.task(cost="1s")
def report(avg_3wk_spend: list, spend_per_signup: list, spend_zero_mean_unit_variance: list) -> dict:
    return {"avg_3wk_spend": avg_3wk_spend[-3:], "spend_per_signup": spend_per_signup[-3:],
            "spend_zmuv": spend_zero_mean_unit_variance[-3:],
            "scaled": round(CONFIG["scale"] * spend_per_signup[-1], 2)}


@dagc.pipeline
def features(n: int = 24):
    s = spend(n)
    u = signups(n)
    return report(avg_3wk_spend(s), spend_per_signup(s, u), spend_zero_mean_unit_variance(s))


if __name__ == "__main__":
    print(features())
