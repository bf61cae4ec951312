"""A flow that picks its model by the size of its data with Metaflow's conditional transition (`self.next({...},
condition=...)`, new in Metaflow 2.18): one case goes through an extra step before the cases meet again."""

from metaflow import FlowSpec, Parameter, step


class SizeFlow(FlowSpec):
    """Fit an exact model to small data and a sampled one to large data, then score it."""

    rows = Parameter("rows", help="Rows of data.", default=50)

    @step
    def start(self):
        self.data = [(i * 37) % 101 for i in range(self.rows)]
        self.size = "small" if len(self.data) < 100 else "large"
        self.next({"small": self.fit_exact, "large": self.fit_sampled}, condition="size")

    @step
    def fit_exact(self):
        self.model = ("exact", sum(self.data) / len(self.data))
        self.next(self.score)

    @step
    def fit_sampled(self):
        sample = self.data[::10]
        self.model = ("sampled", sum(sample) / len(sample))
        self.next(self.check)

    @step
    def check(self):
        self.sample_error = abs(self.model[1] - sum(self.data) / len(self.data))
        self.next(self.score)

    @step
    def score(self):
        self.squared_error = sum((x - self.model[1]) ** 2 for x in self.data) / len(self.data)
        self.next(self.end)

    @step
    def end(self):
        print("model:", self.model, "squared error:", self.squared_error)


if __name__ == "__main__":
    SizeFlow()
