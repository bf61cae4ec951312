"""A model-selection sweep over scikit-learn estimators on one tabular dataset (the loop of scikit-learn's
"classifier comparison" example and of the usual notebook sweeps: a dict of candidate estimators and
hyperparameters, each cross-validated on the same DataFrame, then the best one picked), ported to dagc.

Kept as such sweeps are written: the data is one pandas DataFrame with a target column; a helper builds
each estimator from its name and hyperparameters (a `StandardScaler` pipeline where the model needs it,
`random_state=` wherever the estimator takes one); each candidate is fit and scored with
`cross_val_score` on a `StratifiedKFold(shuffle=True, random_state=...)`; a last step picks the best mean
score. Changed: the data builder, the fit-and-score function and the picking function are `@dagc.task`s, and
the loop over candidates is in a `@dagc.pipeline` (dagc spreads the independent fits).
"""

import numpy as np
import pandas as pd
from sklearn.datasets import make_classification
from sklearn.ensemble import GradientBoostingClassifier, RandomForestClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedKFold, cross_val_score
from sklearn.neighbors import KNeighborsClassifier
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.tree import DecisionTreeClassifier

import dagc

SEED = 0
TARGET = "label"
CANDIDATES = [
    ("logistic_regression", {"C": 0.1}),
    ("logistic_regression", {"C": 10.0}),
    ("knn", {"n_neighbors": 5}),
    ("knn", {"n_neighbors": 15}),
    ("decision_tree", {"max_depth": 4}),
    ("random_forest", {"n_estimators": 30, "max_depth": 6}),
    ("gradient_boosting", {"n_estimators": 30, "learning_rate": 0.1}),
]


def build_estimator(name: str, params: dict):
    if name == "logistic_regression":
        return make_pipeline(StandardScaler(), LogisticRegression(max_iter=500, random_state=SEED, **params))
    if name == "knn":
        return make_pipeline(StandardScaler(), KNeighborsClassifier(**params))
    if name == "decision_tree":
        return DecisionTreeClassifier(random_state=SEED, **params)
    if name == "random_forest":
        return RandomForestClassifier(random_state=SEED, **params)
    if name == "gradient_boosting":
        return GradientBoostingClassifier(random_state=SEED, **params)
    raise ValueError(f"unknown estimator {name!r}")


@dagc.task(cost="2s")
def load_dataset(n_samples: int, seed: int) -> pd.DataFrame:
    X, y = make_classification(n_samples=n_samples, n_features=8, n_informative=5, n_redundant=1,
                               class_sep=0.8, random_state=seed)
    df = pd.DataFrame(X, columns=[f"f{i}" for i in range(X.shape[1])])
    df[TARGET] = y
    return df


@dagc.task(cost="8s")
def fit_and_score(df: pd.DataFrame, name: str, params: dict, folds: int) -> dict:
    X = df.drop(columns=[TARGET])
    y = df[TARGET]
    model = build_estimator(name, params)
    cv = StratifiedKFold(n_splits=folds, shuffle=True, random_state=SEED)
    scores = cross_val_score(model, X, y, cv=cv, scoring="accuracy")
    return {"model": name, "params": params, "mean": round(float(np.mean(scores)), 6),
            "std": round(float(np.std(scores)), 6)}


@dagc.task(cost="100ms")
def pick_best(results: list) -> dict:
    ranked = sorted(results, key=lambda r: (-r["mean"], r["std"], r["model"]))
    return {"best": ranked[0], "ranking": [(r["model"], r["mean"]) for r in ranked]}


@dagc.pipeline
def sweep(n_samples: int = 400, seed: int = 7, folds: int = 3):
    df = load_dataset(n_samples, seed)
    results = [fit_and_score(df, name, params, folds) for name, params in CANDIDATES]
    return pick_best(results)


if __name__ == "__main__":
    print(sweep())
