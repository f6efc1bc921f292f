"""One partition per video, keyed by its video id."""

import dagster as dg

# The name the instance stores the keys under (the definition's own `.name` is typed Optional).
VIDEO_PARTITIONS = "videos"
video_partitions = dg.DynamicPartitionsDefinition(name=VIDEO_PARTITIONS)
