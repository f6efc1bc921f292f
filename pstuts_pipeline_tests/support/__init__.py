"""What the tests and the benchmarks share: data, servers, workspaces, fakes; both import it as
`pstuts_pipeline_tests.support.<module>` (pytest from the checkout root, benchmarks as `python -m benchmarks.<name>`)."""

from pathlib import Path

# The checkout: the sample data, scripts/, deploy/ and the folder the commands run in.
REPO = Path(__file__).resolve().parents[2]
