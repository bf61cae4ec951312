"""A ZenML scikit-learn training pipeline (the starter/quickstart `digits` pipeline: `importer` →
`svc_trainer` → `evaluator`, and its random-forest variant), ported to dagc.

Kept as ZenML users write it: steps are plain functions over numpy arrays; the importer loads the digits
dataset bundled with scikit-learn and splits it with `train_test_split(..., shuffle=False)`, returning four
outputs; each trainer builds its estimator (`SVC(gamma=...)`, `RandomForestClassifier(...,
random_state=42)`), fits it and returns it (`ClassifierMixin`); the evaluator scores a model on the test
split. As in ZenML's step-configuration docs, the same trainer step runs twice with different parameters
(two gammas), beside the forest trainer: three independent trainers. Changed: `@step` is `@dagc.task`,
`@pipeline` is `@dagc.pipeline`; ZenML's `Annotated[...]` output names are the tuple's order.
"""

import numpy as np
from sklearn.base import ClassifierMixin
from sklearn.datasets import load_digits
from sklearn.ensemble import RandomForestClassifier
from sklearn.model_selection import train_test_split
from sklearn.svm import SVC

import dagc


@dagc.task(cost="2s")
def importer(test_size: float) -> tuple:
    """Loads the digits dataset as normal numpy arrays."""
    digits = load_digits()
    data = digits.images.reshape((len(digits.images), -1))
    X_train, X_test, y_train, y_test = train_test_split(data, digits.target, test_size=test_size, shuffle=False)
    return X_train, X_test, y_train, y_test


@dagc.task(cost="10s")
def svc_trainer(X_train: np.ndarray, y_train: np.ndarray, gamma: float = 0.001) -> ClassifierMixin:
    """Train a sklearn SVC classifier."""
    model = SVC(gamma=gamma)
    model.fit(X_train, y_train)
    return model


@dagc.task(cost="10s")
def random_forest_trainer(X_train: np.ndarray, y_train: np.ndarray, n_estimators: int = 50,
                          max_depth: int = 8) -> ClassifierMixin:
    """Train a sklearn random forest."""
    model = RandomForestClassifier(n_estimators=n_estimators, max_depth=max_depth, random_state=42)
    model.fit(X_train, y_train)
    return model


@dagc.task(cost="1s")
def evaluator(X_test: np.ndarray, y_test: np.ndarray, model: ClassifierMixin) -> float:
    """Calculate the accuracy on the test set."""
    test_acc = model.score(X_test, y_test)
    print(f"Test accuracy: {test_acc}")
    return round(float(test_acc), 6)


@dagc.task(cost="100ms")
def select_model(accuracies: dict) -> dict:
    best = max(sorted(accuracies), key=lambda name: accuracies[name])
    return {"best": best, "accuracies": accuracies}


@dagc.pipeline
def digits_pipeline(test_size: float = 0.2):
    X_train, X_test, y_train, y_test = importer(test_size)
    svc_small = svc_trainer(X_train, y_train, gamma=0.001)
    svc_large = svc_trainer(X_train, y_train, gamma=0.01)
    forest = random_forest_trainer(X_train, y_train, n_estimators=40, max_depth=10)
    return select_model({
        "svc_gamma_0.001": evaluator(X_test, y_test, svc_small),
        "svc_gamma_0.01": evaluator(X_test, y_test, svc_large),
        "random_forest": evaluator(X_test, y_test, forest),
    })


if __name__ == "__main__":
    print(digits_pipeline())
