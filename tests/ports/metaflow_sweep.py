"""A penalty sweep written the way Metaflow users write one (after the tutorials' foreach and join steps): a static
split, a foreach nested in a foreach (over a class-level list), joins that pick the best fit and merge artifacts,
and the step decorators @resources, @timeout, @retry and @catch."""

import os

from metaflow import FlowSpec, Parameter, catch, current, resources, retry, step, timeout


class SweepFlow(FlowSpec):
    """Fit a ridge regression for each feature set and penalty; keep the best fit."""

    seed = Parameter("seed", help="Seed of the synthetic data.", default=7)
    n_samples = Parameter("n-samples", help="Rows of synthetic data.", default=120)
    scratch = Parameter("scratch", help="Directory where the flaky step leaves its marker.", default="")

    ALPHAS = [0.01, 1.0, 30.0]

    @step
    def start(self):
        import numpy as np

        rng = np.random.default_rng(self.seed)
        x = rng.normal(size=(self.n_samples, 4))
        self.X = x.tolist()
        self.y = (x @ np.array([1.5, -2.0, 0.5, 0.0]) + rng.normal(scale=0.1, size=self.n_samples)).tolist()
        self.feature_sets = [[0, 1], [0, 1, 2, 3]]
        self.next(self.sweep, self.describe)

    @step
    def describe(self):
        self.mean_y = round(sum(self.y) / len(self.y), 10)
        self.next(self.join_branches)

    @step
    def sweep(self):
        self.next(self.per_features, foreach="feature_sets")

    @resources(cpu=2, memory=2048)
    @step
    def per_features(self):
        self.features = self.input
        self.next(self.fit, foreach="ALPHAS")

    @timeout(seconds=120)
    @step
    def fit(self):
        import numpy as np

        x = np.array(self.X)[:, self.features]
        y = np.array(self.y)
        self.alpha = self.input
        w = np.linalg.solve(x.T @ x + self.alpha * np.eye(x.shape[1]), x.T @ y)
        self.mse = round(float(np.mean((x @ w - y) ** 2)), 10)
        self.where = [frame[:2] for frame in self.foreach_stack()]
        self.next(self.join_alphas)

    @step
    def join_alphas(self, inputs):
        best = min(inputs, key=lambda inp: inp.mse)
        self.best = (best.features, best.alpha, best.mse)
        self.places = [inp.where for inp in inputs]
        self.merge_artifacts(inputs, include=["features"])
        self.next(self.join_features)

    @step
    def join_features(self, inputs):
        self.fits = [inp.best for inp in inputs]
        self.best = min(self.fits, key=lambda fit: fit[2])
        self.places = [place for inp in inputs for place in inp.places]
        self.next(self.join_branches)

    @step
    def join_branches(self, inputs):
        self.merge_artifacts(inputs, exclude=["X"])
        self.next(self.flaky)

    @retry(times=2, minutes_between_retries=0)
    @step
    def flaky(self):
        marker = os.path.join(self.scratch, "flaky-tried")
        if self.scratch and not os.path.exists(marker):
            open(marker, "w").close()
            raise RuntimeError("the first attempt fails")
        self.retried = os.path.exists(marker)
        self.attempt = current.retry_count
        self.step = current.step_name
        self.next(self.risky)

    @catch(var="error", print_exception=False)
    @step
    def risky(self):
        self.before_failure = len(self.fits)
        raise ValueError("no model for an empty feature set")
        self.next(self.end)

    @step
    def end(self):
        self.error_type = self.error.type
        print("best fit:", self.best)


if __name__ == "__main__":
    SweepFlow()
