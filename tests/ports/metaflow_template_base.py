# A training template other flows derive from (Metaflow's FlowSpec inheritance): its parameters, its config file,
# the helper that reads them, and the first and last steps of every flow made from it. metaflow_template.py is
# such a flow.

import os

from metaflow import Config, FlowSpec, Parameter, retry, step

HERE = os.path.dirname(os.path.abspath(__file__))


class TrainingTemplate(FlowSpec):
    lr = Parameter("lr", default=None, type=float, help="Override for train_args.lr of the config file.")
    seed = Parameter("seed", default=7, type=int)
    base_config = Config("config", default=os.path.join(HERE, "metaflow_template.json"))
    repeats = 1

    def _resolve_config(self):
        train_args = dict(self.base_config["train_args"])  # (a ConfigValue cannot be changed)
        if self.lr:
            train_args["lr"] = self.lr
        self.train_args = train_args

    @retry(times=1)
    @step
    def start(self):
        self._resolve_config()
        self.grid = [self.train_args["lr"] * factor for factor in self.base_config.grid.factors]
        self.next(self.train, foreach="grid")

    @step
    def end(self):
        self.summary = {"best_lr": self.best_lr, "loss": round(self.best_loss, 6), "runs": len(self.losses)}
        print("best:", self.summary)
