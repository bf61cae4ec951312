"""An Airflow-style file: the pipeline is called at the module's top level, with no `__main__` guard."""

import dagc


@dagc.task
def double(x: int) -> int:
    print("double ran")
    return 2 * x


@dagc.pipeline
def main(n: int = 2) -> int:
    return double(n)


main()
