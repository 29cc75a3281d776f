"""Where a run's pieces live in a result store (laid out by fingerprint).

generations/<generation fp>/s<shard size>/shard-00000.parquet   cached outputs
runs/<run fp>/s<shard size>/shard-00000.parquet                 per-sample rows
runs/<run fp>/result.json                                       the RunResult
runs/<run fp>/manifest.json                                     plan and state

The shard size is part of the path: it decides batch composition (and so,
for batching backends, floating-point results), and a shard is only the same
shard under the same size.
"""

from __future__ import annotations

from dataclasses import dataclass


def run_result(run_fp: str) -> str:
    """Where a run's RunResult lives, from its fingerprint alone (for readers that know no shard size)."""
    return f"runs/{run_fp}/result.json"


@dataclass(frozen=True)
class RunLayout:
    run_fp: str
    gen_fp: str
    shard_size: int

    @staticmethod
    def shard_name(i: int) -> str:
        return f"shard-{i:05d}.parquet"

    @staticmethod
    def shard_index(name: str) -> int:
        return int(name.split("-")[1].split(".")[0])

    @property
    def run_dir(self) -> str:
        return f"runs/{self.run_fp}"

    @property
    def shards_dir(self) -> str:
        return f"{self.run_dir}/s{self.shard_size}"

    @property
    def gen_dir(self) -> str:
        return f"generations/{self.gen_fp}/s{self.shard_size}"

    def shard(self, i: int) -> str:
        return f"{self.shards_dir}/{self.shard_name(i)}"

    def gen_shard(self, i: int) -> str:
        return f"{self.gen_dir}/{self.shard_name(i)}"

    @property
    def result(self) -> str:
        return run_result(self.run_fp)

    @property
    def manifest(self) -> str:
        return f"{self.run_dir}/manifest.json"
