"""A Hamilton dataflow over pandas Series (Hamilton's `hello_world` `my_functions.py` and its
feature-engineering examples), ported to dagc.

Kept as Hamilton users write it: one function per column, named after the column it computes, taking the
columns (or scalars) it needs as parameters named after them; the loader splits a marketing DataFrame into
its `spend` and `signups` Series; intermediate scalars (`spend_mean`, `spend_std_dev`) are functions too;
the driver asks for a list of outputs and gets them as one DataFrame. Changed: each function is a
`@dagc.task`; the driver's `dr.execute([...])` is a pipeline that calls the functions, passing each
parameter the result of the function of that name (dagc finds the independent branches), and the final
frame is returned as a dict of rounded lists.
"""

import numpy as np
import pandas as pd

import dagc

OUTPUT_COLUMNS = ["spend", "signups", "avg_3wk_spend", "spend_per_signup", "spend_zero_mean_unit_variance",
                  "log_spend", "signups_pct_change", "spend_per_signup_rolling"]


# ---- data_loaders.py ------------------------------------------------------------------------------------
@dagc.task(cost="1s")
def marketing_data(weeks: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    week = pd.date_range("2023-01-02", periods=weeks, freq="W-MON")
    spend = 10 + 5 * np.sin(np.arange(weeks) / 3) + np.arange(weeks) * 0.5 + rng.normal(0, 0.5, weeks)
    signups = 1 + 3 * np.abs(np.cos(np.arange(weeks) / 4)) + np.arange(weeks) * 0.1 + rng.uniform(0, 0.2, weeks)
    return pd.DataFrame({"week": week, "spend": spend.round(3), "signups": signups.round(3)}).set_index("week")


@dagc.task(cost="200ms")
def spend(marketing_data: pd.DataFrame) -> pd.Series:
    """Marketing spend per week."""
    return marketing_data["spend"]


@dagc.task(cost="200ms")
def signups(marketing_data: pd.DataFrame) -> pd.Series:
    """Sign ups per week."""
    return marketing_data["signups"]


# ---- my_functions.py ------------------------------------------------------------------------------------
@dagc.task(cost="2s")
def avg_3wk_spend(spend: pd.Series) -> pd.Series:
    """Rolling 3 week average spend."""
    return spend.rolling(3, min_periods=1).mean()


@dagc.task(cost="2s")
def spend_per_signup(spend: pd.Series, signups: pd.Series) -> pd.Series:
    """The cost per signup in relation to spend."""
    return spend / signups


@dagc.task(cost="1s")
def spend_mean(spend: pd.Series) -> float:
    """Shows function creating a scalar. In this case it computes the mean of the entire column."""
    return spend.mean()


@dagc.task(cost="2s")
def spend_zero_mean(spend: pd.Series, spend_mean: float) -> pd.Series:
    """Shows function that takes a scalar. In this case to zero mean spend."""
    return spend - spend_mean


@dagc.task(cost="1s")
def spend_std_dev(spend: pd.Series) -> float:
    """Function that computes the standard deviation of the spend column."""
    return spend.std()


@dagc.task(cost="2s")
def spend_zero_mean_unit_variance(spend_zero_mean: pd.Series, spend_std_dev: float) -> pd.Series:
    """Function showing one way to make spend have zero mean and unit variance."""
    return spend_zero_mean / spend_std_dev


@dagc.task(cost="2s")
def log_spend(spend: pd.Series) -> pd.Series:
    """Spend on a log scale."""
    return np.log1p(spend)


@dagc.task(cost="2s")
def signups_pct_change(signups: pd.Series) -> pd.Series:
    """Week over week change in signups (0 for the first week)."""
    return signups.pct_change().fillna(0.0)


@dagc.task(cost="2s")
def spend_per_signup_rolling(spend_per_signup: pd.Series) -> pd.Series:
    """Cost per signup, smoothed over 4 weeks."""
    return spend_per_signup.rolling(4, min_periods=1).median()


# ---- the driver: dr.execute(OUTPUT_COLUMNS) -------------------------------------------------------------
@dagc.task(cost="500ms")
def build_result(columns: list, spend: pd.Series, signups: pd.Series, avg_3wk_spend: pd.Series,
                 spend_per_signup: pd.Series, spend_zero_mean_unit_variance: pd.Series, log_spend: pd.Series,
                 signups_pct_change: pd.Series, spend_per_signup_rolling: pd.Series) -> dict:
    df = pd.DataFrame({"spend": spend, "signups": signups, "avg_3wk_spend": avg_3wk_spend,
                       "spend_per_signup": spend_per_signup,
                       "spend_zero_mean_unit_variance": spend_zero_mean_unit_variance, "log_spend": log_spend,
                       "signups_pct_change": signups_pct_change,
                       "spend_per_signup_rolling": spend_per_signup_rolling})[columns]
    return {name: [round(float(v), 5) for v in df[name]] for name in columns}


@dagc.pipeline
def hello_world(weeks: int = 26, seed: int = 11):
    data = marketing_data(weeks, seed)
    s = spend(data)
    u = signups(data)
    per_signup = spend_per_signup(s, u)
    zero_mean = spend_zero_mean(s, spend_mean(s))
    return build_result(OUTPUT_COLUMNS, s, u, avg_3wk_spend(s), per_signup,
                        spend_zero_mean_unit_variance(zero_mean, spend_std_dev(s)), log_spend(s),
                        signups_pct_change(u), spend_per_signup_rolling(per_signup))


if __name__ == "__main__":
    print(hello_world())
