"""Stores intermediate assets one pickle per partition, so one run can carry many videos."""

import pickle
from typing import Any

import dagster as dg
from pydantic import Field
from upath import UPath

from pstuts_pipeline.settings import storage_dir


class PartitionedPickleIOManager(dg.ConfigurableIOManager):
    """Partitioned assets return `{partition_key: value}`; each value is stored under its own key.

    Dagster's default IO manager refuses outputs that span several partitions, which a single-run backfill
    of many videos produces. The base path may be any fsspec URL (s3://, gs://) for a multi-machine setup.
    """

    base_path: str = Field(default="", description="Folder or object-store URL (default: io/ under storage).")

    def _root(self) -> UPath:
        return UPath(self.base_path) if self.base_path else UPath(storage_dir() / "io")

    def _path(self, asset_key: dg.AssetKey, partition_key: str | None) -> UPath:
        folder = self._root().joinpath(*asset_key.path)
        return folder / f"{partition_key}.pkl" if partition_key is not None else folder.with_suffix(".pkl")

    def _write(self, path: UPath, value: Any) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(path.name + ".tmp")
        temporary.write_bytes(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))
        temporary.rename(path)

    def handle_output(self, context: dg.OutputContext, obj: Any) -> None:
        if obj is None:
            return
        if not context.has_asset_partitions:
            self._write(self._path(context.asset_key, None), obj)
            return
        missing = set(context.asset_partition_keys) - set(obj)
        if missing:
            raise dg.Failure(f"{context.asset_key.to_user_string()}: no value for partitions {sorted(missing)}")
        for key in context.asset_partition_keys:
            self._write(self._path(context.asset_key, key), obj[key])

    def load_input(self, context: dg.InputContext) -> Any:
        asset_key = context.asset_key
        if not context.has_asset_partitions:
            return pickle.loads(self._path(asset_key, None).read_bytes())
        return {key: pickle.loads(self._path(asset_key, key).read_bytes()) for key in context.asset_partition_keys}
