"""The latest materialization of each video partition of an asset, in two queries however many partitions."""

import dagster as dg


def latest_by_partition(
    instance: dg.DagsterInstance, asset_key: dg.AssetKey, partitions: list[str]
) -> dict[str, dg.EventLogRecord]:
    """Each partition's latest materialization record (partitions never materialized are left out)."""
    latest = instance.get_latest_storage_id_by_partition(
        asset_key, dg.DagsterEventType.ASSET_MATERIALIZATION, set(partitions)
    )
    if not latest:
        return {}
    records = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=asset_key, storage_ids=list(latest.values())), limit=len(latest)
    ).records
    partition_of = {storage_id: partition for partition, storage_id in latest.items()}
    return {partition_of[record.storage_id]: record for record in records}
