"""One partition per video, keyed by its video id."""

import dagster as dg

video_partitions = dg.DynamicPartitionsDefinition(name="videos")
