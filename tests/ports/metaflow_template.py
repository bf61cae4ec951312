# A flow made from the training template of metaflow_template_base.py: it inherits `start` (which goes to the
# `train` step this class adds), `end`, the parameters, the config and its helper, and overrides a class value.

from metaflow import step
from metaflow_template_base import TrainingTemplate


class LinearFitFlow(TrainingTemplate):
    repeats = 3

    @step
    def train(self):
        import random

        rng = random.Random(self.seed)
        xs = [rng.uniform(-1, 1) for _ in range(64)]
        ys = [3.0 * x + 0.5 for x in xs]
        w = b = 0.0
        for _ in range(self.base_config.train_args.epochs * self.repeats):
            grad_w = sum(2 * (w * x + b - y) * x for x, y in zip(xs, ys)) / len(xs)
            grad_b = sum(2 * (w * x + b - y) for x, y in zip(xs, ys)) / len(xs)
            w -= self.input * grad_w
            b -= self.input * grad_b
        self.lr_used = self.input
        self.loss = sum((w * x + b - y) ** 2 for x, y in zip(xs, ys)) / len(xs)
        self.next(self.pick)

    @step
    def pick(self, inputs):
        self.losses = {i.lr_used: i.loss for i in inputs}
        self.best_lr = min(self.losses, key=self.losses.get)
        self.best_loss = self.losses[self.best_lr]
        self.merge_artifacts(inputs, include=["train_args"])
        self.next(self.end)


if __name__ == "__main__":
    LinearFitFlow()
