"""An Airflow-style file: the pipeline is called at the module's top level, with no `__main__` guard."""

import os

import dagc


@dagc.task
def double(x: int) -> int:
    print("double ran")
    if os.environ.get("IDIOMS_RUN_LOG"):  # (where a test counts the runs)
        with open(os.environ["IDIOMS_RUN_LOG"], "a") as log:
            log.write("double ran\n")
    return 2 * x


@dagc.pipeline
def main(n: int = 2) -> int:
    return double(n)


main()
