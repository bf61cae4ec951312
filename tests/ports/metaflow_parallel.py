# A gang of tasks (Metaflow's @parallel with `num_parallel=`): each sums its shard of the numbers, knowing its
# index and the size of the gang from `current.parallel`, and the join adds the shards up.

from metaflow import FlowSpec, Parameter, current, parallel, step


class ShardedSumFlow(FlowSpec):
    workers = Parameter("workers", default=3, type=int)
    size = Parameter("size", default=100, type=int)

    @step
    def start(self):
        self.numbers = list(range(1, self.size + 1))
        self.next(self.shard, num_parallel=self.workers)

    @parallel
    @step
    def shard(self):
        self.rank = current.parallel.node_index
        self.world = current.parallel.num_nodes
        self.partial = sum(self.numbers[self.rank :: self.world])
        self.next(self.reduce)

    @step
    def reduce(self, inputs):
        self.ranks = [i.rank for i in inputs]
        self.worlds = sorted({i.world for i in inputs})
        self.total = sum(i.partial for i in inputs)
        assert self.total == self.size * (self.size + 1) // 2
        self.next(self.end)

    @step
    def end(self):
        print("sum of", self.size, "numbers over", self.workers, "tasks:", self.total)


if __name__ == "__main__":
    ShardedSumFlow()
