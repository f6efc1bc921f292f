"""Stores intermediate assets as JSON, one file per partition, so one run can carry many videos.

JSON, not pickle: loading a pickle runs whatever code the file names, and these files may live on shared object
storage. Each file says which of a few known shapes it holds, and only those are rebuilt on load.
"""

import json
import typing
from collections.abc import Callable
from typing import Any

import dagster as dg
from langchain_core.documents import Document
from pydantic import Field
from upath import UPath

from pstuts_pipeline.chunking.chunker import TimedChunk
from pstuts_pipeline.chunking.time_repair import Phrase
from pstuts_pipeline.settings import paths
from pstuts_pipeline.sources import SourceVideo

FORMAT = "pstuts-io/1"


def _document(value: dict[str, Any]) -> Document:
    return Document(page_content=value["page_content"], metadata=value["metadata"], id=value.get("id"))


def _document_fields(document: Document) -> dict[str, Any]:
    return {"page_content": document.page_content, "metadata": document.metadata, "id": document.id}


def _shared_documents(documents: list[Document]) -> dict[str, Any]:
    """Documents with the metadata every one of them holds alike (the video's title, url...) stored once.

    Per phrase, a 1 MB title made a 100-phrase video's file 100 MB; now it costs its size once, on disk and, as
    the loaded documents share the one value, in memory.
    """
    first = documents[0].metadata
    shared = {k: v for k, v in first.items() if all(k in d.metadata and d.metadata[k] == v for d in documents)}
    return {
        "shared": shared,
        "documents": [
            {**_document_fields(d), "metadata": {k: v for k, v in d.metadata.items() if k not in shared}}
            for d in documents
        ],
    }


def _documents_from_shared(value: dict[str, Any]) -> list[Document]:
    shared = value["shared"]
    return [
        Document(page_content=v["page_content"], metadata={**shared, **v["metadata"]}, id=v.get("id"))
        for v in value["documents"]
    ]


def _timed_chunk(value: dict[str, Any]) -> TimedChunk:
    return TimedChunk(value["index"], tuple(Phrase(*p) for p in value["phrases"]))


def _timed_chunk_fields(chunk: TimedChunk) -> dict[str, Any]:
    return {"index": chunk.index, "phrases": [[p.sent_id, p.text, p.begin, p.end] for p in chunk.phrases]}


# shape -> (how to turn a stored value back into an object); plain JSON values are stored as they are.
DECODERS: dict[str, Callable[[Any], Any]] = {
    "json": lambda value: value,
    "SourceVideo": SourceVideo.from_json,
    "Document": _document,
    # Written before 2026-12-04 (video fields repeated per document): still read.
    "list[Document]": lambda values: [_document(v) for v in values],
    "list[Document]/shared": _documents_from_shared,
    "list[TimedChunk]": lambda values: [_timed_chunk(v) for v in values],
}


def encode(value: Any) -> str:
    """A value as a JSON document naming its shape; refuses anything it could not rebuild exactly."""
    data: object
    if isinstance(value, SourceVideo):
        shape, data = "SourceVideo", value.to_json()
    elif isinstance(value, Document):
        shape, data = "Document", _document_fields(value)
    elif isinstance(value, list) and value and all(isinstance(v, Document) for v in value):
        shape, data = "list[Document]/shared", _shared_documents(value)
    elif isinstance(value, list) and value and all(isinstance(v, TimedChunk) for v in value):
        shape, data = "list[TimedChunk]", [_timed_chunk_fields(v) for v in value]
    else:
        shape, data = "json", value
    try:
        return json.dumps({"format": FORMAT, "shape": shape, "value": data}, ensure_ascii=False)
    except TypeError as error:
        raise TypeError(f"cannot store a {type(value).__name__} as JSON: {error}") from None


def shape_of(python_type: Any) -> str | None:
    """The stored shape a value of this type is written as (e.g. list[TimedChunk]), or None when any shape may do."""
    names = {SourceVideo: "SourceVideo", Document: "Document"}
    if python_type in names:
        return names[python_type]
    if typing.get_origin(python_type) is list:
        (item,) = typing.get_args(python_type)
        return f"list[{item.__name__}]" if f"list[{getattr(item, '__name__', '')}]" in DECODERS else None
    return None


def decode(text: str, where: str, expected: str | None = None) -> Any:
    """The value a file holds; an unknown format or shape, or not the `expected` one, is refused, naming the file."""
    try:
        stored = json.loads(text)
    except ValueError as error:
        raise ValueError(f"{where}: not a stored asset value ({error})") from None
    if not isinstance(stored, dict) or stored.get("format") != FORMAT or stored.get("shape") not in DECODERS:
        raise ValueError(f"{where}: not a {FORMAT} file (format or shape missing or unknown)")
    # "list[Document]/shared" is how a list[Document] is written since 2026-12-04 (video fields once per file).
    if expected is not None and stored["shape"].split("/")[0] != expected and stored["value"] != []:
        # Timed chunks were stored as LangChain Documents before 2026-12-04.
        raise ValueError(
            f"{where}: written by an older version (a {stored['shape']}, not a {expected}); re-materialize its asset"
        )
    try:
        return DECODERS[stored["shape"]](stored["value"])
    except (KeyError, TypeError) as error:
        # A value of a shape whose fields have since changed (a SourceVideo holding the raw record, before 2026-12).
        raise ValueError(f"{where}: written by an older version ({error}); re-materialize its asset") from None


class PartitionedJsonIOManager(dg.ConfigurableIOManager):
    """Partitioned assets return `{partition_key: value}`; each value is stored under its own key, as JSON.

    Dagster's default IO manager refuses outputs that span several partitions, which a single-run backfill
    of many videos produces. The base path may be any fsspec URL (s3://, gs://) for a multi-machine setup.
    """

    base_path: str = Field(default="", description="Folder or object-store URL (default: io/ under storage).")

    def _root(self) -> UPath:
        return UPath(self.base_path) if self.base_path else UPath(paths().storage_dir / "io")

    def _path(self, asset_key: dg.AssetKey, partition_key: str | None) -> UPath:
        folder = self._root().joinpath(*asset_key.path)
        return folder / f"{partition_key}.json" if partition_key is not None else folder.with_suffix(".json")

    def _write(self, path: UPath, value: Any) -> None:
        temporary = path.with_name(path.name + ".tmp")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            temporary.write_text(encode(value), encoding="utf-8")
            temporary.rename(path)
        except OSError as error:  # "No space left on device" alone does not say where (PSTUTS_IO_PATH)
            temporary.unlink(missing_ok=True)
            raise OSError(error.errno, f"cannot write {path} (PSTUTS_IO_PATH): {error.strerror or error}") from None

    def _read(self, path: UPath, expected: str | None = None) -> Any:
        if not path.exists():
            old = path.with_suffix(".pkl")
            if old.exists():
                # Never unpickled: a pickle runs code on load. Re-materializing writes the JSON file.
                raise FileNotFoundError(
                    f"{path}: missing; {old.name} beside it is an old pickle, which is not loaded (it could run code): "
                    "re-materialize the upstream asset for this partition"
                )
            raise FileNotFoundError(f"{path}: missing; materialize the upstream asset for this partition first")
        return decode(path.read_text(encoding="utf-8"), str(path), expected)

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
        """The stored value(s); a missing or unreadable upstream fails the step at once: retrying cannot help it."""
        asset_key = context.asset_key
        try:
            if not context.has_asset_partitions:
                return self._read(self._path(asset_key, None))
            # The input is {partition: value}, as the consumer declares it: each file holds one value of the dict's
            # value type.
            wanted = context.dagster_type.typing_type
            args = typing.get_args(wanted) if typing.get_origin(wanted) is dict else ()
            expected = shape_of(args[1]) if len(args) == 2 else None
            return {key: self._read(self._path(asset_key, key), expected) for key in context.asset_partition_keys}
        except (FileNotFoundError, ValueError) as error:
            raise dg.Failure(str(error), allow_retries=False) from None
