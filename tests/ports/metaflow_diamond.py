# A flow whose steps come from two base flow classes of the same file (a diamond over FlowSpec), one of them
# overridden, with Configs given as default values: a dict, text read by a parser, and plain text.

import json

from metaflow import Config, FlowSpec, Parameter, retry, step


def csv_parser(text):
    return {"columns": text.strip().split(",")}


class Loader(FlowSpec):
    rows = Parameter("rows", default=6, type=int)
    source = Config("source", default_value={"name": "synthetic", "scale": 2})

    def load(self):
        return [[(r + 1) * (c + 1) * self.source.scale for c in range(3)] for r in range(self.rows)]

    @step
    def start(self):
        self.table = self.load()
        self.next(self.clean)

    @step
    def clean(self):
        self.kept = len(self.table)
        self.next(self.report)


class Reporter(FlowSpec):
    columns = Config("columns", default_value="a,b,c", parser=csv_parser)
    style = Config("style", default_value='{"digits": 2}', plain=True)

    @step
    def report(self):
        digits = json.loads(self.style)["digits"]
        self.means = {name: round(sum(row[i] for row in self.table) / max(len(self.table), 1), digits)
                      for i, name in enumerate(self.columns.columns)}
        self.next(self.end)

    @step
    def end(self):
        print(self.source.name, "means:", self.means)


class CleanReport(Loader, Reporter):
    threshold = Parameter("threshold", default=5)

    @retry(times=1)
    @step
    def clean(self):
        self.table = [row for row in self.table if row[0] >= self.threshold]
        self.kept = len(self.table)
        self.next(self.report)


if __name__ == "__main__":
    CleanReport()
