"""The failure-entry model: the single source of truth for what a `kb/<id>.yaml` file holds.

The JSON Schema in `schema/` is exported from these classes (`denpex-kb schema`), the loader validates
against them, and the compiler, matcher and site read nothing but instances of them.
"""

from __future__ import annotations

import re
from enum import Enum
from typing import Annotated, Literal

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

ID_PATTERN = r"^[a-z0-9]+(?:-[a-z0-9]+)*$"
_ID_RE = re.compile(ID_PATTERN)


class Phase(str, Enum):
    """Where in a training job's life the failure surfaces."""

    setup = "setup"
    launch = "launch"
    initialization = "initialization"
    data_loading = "data-loading"
    forward = "forward"
    backward = "backward"
    optimizer_step = "optimizer-step"
    communication = "communication"
    checkpointing = "checkpointing"
    hardware = "hardware"
    runtime = "runtime"


PHASE_INFO: dict[Phase, tuple[str, str]] = {
    Phase.setup: (
        "Setup",
        "Before the job runs any training code: installing packages, building extensions, importing "
        "modules, detecting GPUs and drivers.",
    ),
    Phase.launch: (
        "Launch",
        "Starting the processes: torchrun, deepspeed, srun, mpirun; rendezvous, ports and the launcher's "
        "own reports about children that died.",
    ),
    Phase.initialization: (
        "Initialization",
        "Building the model and the distributed state: process groups, parallel layouts, engine "
        "configuration, parameter sharding and wrapping.",
    ),
    Phase.data_loading: (
        "Data loading",
        "Reading and preparing batches: DataLoader workers, shared memory, file handles, dataset paths.",
    ),
    Phase.forward: (
        "Forward pass",
        "Running the model on a batch: kernels, memory allocation, tensor shapes, dtypes and devices, "
        "compiled graphs.",
    ),
    Phase.backward: (
        "Backward pass",
        "Computing gradients: autograd graph errors, gradient reduction across ranks, NaN and Inf values.",
    ),
    Phase.optimizer_step: (
        "Optimizer step",
        "Updating parameters: loss scaling, overflow handling, optimizer state.",
    ),
    Phase.communication: (
        "Communication",
        "Collectives and point-to-point traffic between ranks: NCCL, Gloo, sockets, InfiniBand, timeouts "
        "and desynchronised ranks.",
    ),
    Phase.checkpointing: (
        "Checkpointing",
        "Saving and loading state: state dicts, sharded and ZeRO checkpoints, file formats, disk space.",
    ),
    Phase.hardware: (
        "Hardware",
        "The GPU, its memory, NVLink and the network fabric failing underneath the job: Xid events, ECC "
        "errors, links going down.",
    ),
    Phase.runtime: (
        "Runtime",
        "The job killed or stopped from outside or by the host: OOM killer, signals, crashes, scheduler "
        "limits and preemption.",
    ),
}


class Severity(str, Enum):
    """How bad the failure is for the job that hit it."""

    critical = "critical"  # hardware or data loss; the node or checkpoint needs attention
    high = "high"  # the job dies
    medium = "medium"  # the job dies or degrades, but often recovers on retry
    low = "low"  # usually a warning; a problem only when it persists


class Status(str, Enum):
    draft = "draft"
    experimental = "experimental"
    stable = "stable"
    deprecated = "deprecated"
    removed = "removed"


class SignatureKind(str, Enum):
    literal = "literal"  # fixed text, found as a substring of the line
    regex = "regex"  # an RE2 regular expression, searched in the line
    template = "template"  # text with placeholders such as {num}, {size}, {path}, {rank}


class Stream(str, Enum):
    """Where the line shows up."""

    stderr = "stderr"
    stdout = "stdout"
    dmesg = "dmesg"
    nccl_debug = "nccl-debug"
    scheduler = "scheduler"


class Role(str, Enum):
    """Whether a line typically starts a failure or reports the fallout of one elsewhere."""

    initiating = "initiating"
    collateral = "collateral"


class Relation(str, Enum):
    sibling = "sibling"  # a similar failure that is easy to confuse with this one
    collateral_of = "collateral-of"  # this failure is usually the fallout of the related one
    often_caused_by = "often-caused-by"  # the related failure is a frequent root cause of this one
    replaced_by = "replaced-by"  # this entry was superseded by the related one


class Framework(str, Enum):
    """Frameworks whose fix differs enough to get its own tab."""

    pytorch = "pytorch"
    deepspeed = "deepspeed"
    fsdp = "fsdp"
    hf_trainer = "hf-trainer"
    accelerate = "accelerate"
    lightning = "lightning"
    megatron = "megatron"
    slurm = "slurm"
    kubernetes = "kubernetes"


class CommandPurpose(str, Enum):
    preserve = "preserve"  # keep evidence before the node is recycled
    diagnose = "diagnose"  # tell this failure apart from its siblings
    verify = "verify"  # prove the fix worked


class Retry(str, Enum):
    """What a scheduler should do with the job once this failure started it all."""

    no = "no"  # rerunning the same job fails the same way: fix first
    yes = "yes"  # transient: rerun as it is
    elsewhere = "elsewhere"  # rerun without the node, GPU or link that the log names
    depends = "depends"  # the checklist tells the cases apart; `note` says on what


class Blame(str, Enum):
    """Where the fault lies."""

    code = "code"
    config = "config"
    data = "data"
    environment = "environment"  # image, driver, library versions
    node = "node"  # a GPU, its memory, the host
    fabric = "fabric"  # IB/RoCE/NVLink/switch
    storage = "storage"
    scheduler = "scheduler"  # preemption, time limit, eviction


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=False, use_enum_values=False)


NonEmpty = Annotated[str, Field(min_length=1)]
EntryId = Annotated[str, Field(pattern=ID_PATTERN, min_length=3, max_length=80)]


def _check_http_url(value: str) -> str:
    if not re.match(r"^https?://[^\s/$.?#][^\s]*$", value):
        raise ValueError("must be an http:// or https:// URL")
    return value


def _check_specifiers(value: dict[str, str]) -> dict[str, str]:
    for package, spec in value.items():
        if not re.match(r"^[A-Za-z0-9][A-Za-z0-9._-]*$", package):
            raise ValueError(f"{package!r} is not a package name")
        try:
            SpecifierSet(spec)
        except InvalidSpecifier:
            raise ValueError(
                f"{spec!r} for {package} is not a PEP 440 specifier; write e.g. '<0.12.0' or '>=2.6,<2.8'"
            ) from None
    return value


class Signature(_Strict):
    """One line's worth of text that the failing software prints."""

    kind: SignatureKind = Field(description="literal, regex (RE2) or template with {placeholders}.")
    text: NonEmpty = Field(description="The literal text, the RE2 pattern, or the template.")
    stream: Stream = Field(default=Stream.stderr, description="Where the line shows up.")
    role: Role = Field(
        default=Role.initiating,
        description="initiating: the line names the root failure; collateral: it reports fallout "
        "(a peer died, a launcher summary, a signal sent to siblings).",
    )
    anchors: list[NonEmpty] | None = Field(
        default=None,
        description="Literal substrings one of which every matching line contains. Derived from the "
        "pattern when left out; give them for patterns the derivation cannot read.",
    )
    note: str | None = Field(default=None, description="Which software or version prints this wording.")
    versions: dict[str, str] = Field(
        default_factory=dict,
        description="Package name to PEP 440 specifier of the releases that print this wording, e.g. nccl: "
        "'>=2.23.4,<2.28.9', when it is printed by some releases only (checked in the project's history). A line "
        "that matches says which releases it comes from; versions the log names outside them are pointed out.",
    )

    @field_validator("versions")
    @classmethod
    def _specifiers(cls, value: dict[str, str]) -> dict[str, str]:
        return _check_specifiers(value)


class FingerprintEvent(_Strict):
    level: Literal["info", "warn", "error", "any"] = Field(
        default="any",
        description="The log level the event is printed at. `info` events (healthy output such as NCCL_DEBUG=INFO "
        "setup lines) must lead the sequence: `scan` looks for them only in the lines just before a later event, "
        "never across the whole log.",
    )
    kind: SignatureKind = SignatureKind.literal
    text: NonEmpty


class Fingerprint(_Strict):
    """An ordered run of events that identifies the failure better than any one line."""

    events: list[FingerprintEvent] = Field(min_length=2)
    within_lines: int = Field(default=200, ge=2, le=100_000)


class Conditions(_Strict):
    notes: list[NonEmpty] = Field(default_factory=list, description="Prose: when this failure happens.")
    versions: dict[str, str] = Field(
        default_factory=dict,
        description="Package name to PEP 440 specifier of the affected versions, e.g. deepspeed: '<0.12.0'.",
    )
    scale: str | None = Field(default=None, description="Scale at which it appears (ranks, nodes, model size).")
    hardware: str | None = Field(default=None, description="Hardware it is tied to, if any.")

    @field_validator("versions")
    @classmethod
    def _specifiers(cls, value: dict[str, str]) -> dict[str, str]:
        return _check_specifiers(value)


class FixVariant(_Strict):
    framework: Framework
    body: NonEmpty = Field(description="Markdown: the fix as it is done in this framework.")


class Fix(_Strict):
    summary: Annotated[str, Field(min_length=10, max_length=240)] = Field(
        description="One line: what to change. Shown by `match` and `scan`."
    )
    body: NonEmpty = Field(description="Markdown: the fix in full.")
    variants: list[FixVariant] = Field(default_factory=list)

    @field_validator("summary")
    @classmethod
    def _one_line(cls, value: str) -> str:
        if "\n" in value.strip():
            raise ValueError("the fix summary must be one line; put the details in `body`")
        return value


class Response(_Strict):
    """Whether to rerun the job, rerun it elsewhere, or fix something first; read by `scan`'s verdict."""

    retry: Retry = Field(
        description="no: a rerun fails the same way; yes: transient, rerun as is; elsewhere: rerun without the "
        "node, GPU or link the log names; depends: `note` says on what."
    )
    blame: Blame = Field(description="Where the fault lies.")
    note: Annotated[str, Field(min_length=10, max_length=300)] | None = Field(
        default=None, description="One sentence: what the answer depends on, or why it is what it is."
    )

    @model_validator(mode="after")
    def _depends_says_on_what(self) -> Response:
        if self.retry is Retry.depends and not self.note:
            raise ValueError("retry: depends needs a `note` that says on what")
        if self.note and "\n" in self.note.strip():
            raise ValueError("the response note must be one sentence on one line")
        return self


class Command(_Strict):
    purpose: CommandPurpose
    description: NonEmpty
    run: NonEmpty = Field(description="The shell command.")


class Related(_Strict):
    id: EntryId
    relation: Relation


class Reference(_Strict):
    url: str
    title: NonEmpty

    _url = field_validator("url")(classmethod(lambda cls, v: _check_http_url(v)))


# The three forms, and the retired `source: <repo>/<path>` one, which the model still reads so that `check`
# (DKB110, denpex_kb/provenance.py) can reject it at its place with a precise fix.
_PROVENANCE = re.compile(r"^(https?://\S+|captured: \S.*|[\w.-]+/[\w.-]+#\d+|source: \S.*)$")


class MatchExample(_Strict):
    text: NonEmpty = Field(description="Real output, as a user would paste it.")
    source: str = Field(
        description="Provenance: an issue URL, 'source: <repo>/<file>' or 'captured: <software> <version>'."
    )
    note: str | None = None

    @field_validator("source")
    @classmethod
    def _provenance(cls, value: str) -> str:
        if not _PROVENANCE.match(value):
            raise ValueError(
                "provenance must be an http(s) URL of the original page, 'owner/repo#N' or 'captured: <software> <version>'"
            )
        return value


class NoMatchExample(_Strict):
    text: NonEmpty = Field(description="A benign look-alike that must not match this entry.")
    note: str | None = Field(default=None, description="Why it looks alike and why it is benign.")
    source: str | None = None


class Examples(_Strict):
    match: list[MatchExample] = Field(min_length=1)
    no_match: list[NoMatchExample] = Field(default_factory=list)


def _check_since(value: str) -> str:
    try:
        Version(value)
    except InvalidVersion:
        raise ValueError("`since` must be a version of denpex-kb, e.g. '0.1.0'") from None
    return value


class Entry(_Strict):
    """A failure entry."""

    id: EntryId = Field(description="kebab-case, unique, never reused; equals the file name.")
    title: Annotated[str, Field(min_length=5, max_length=120)]
    summary: Annotated[str, Field(min_length=20, max_length=600)]
    phase: Phase
    tags: list[NonEmpty] = Field(min_length=1, description="From kb/_tags.yaml.")
    severity: Severity
    status: Literal["draft", "experimental", "stable", "deprecated"]
    since: str = Field(description="The denpex-kb version that first shipped this entry.")
    signatures: list[Signature] = Field(min_length=1)
    fingerprint: Fingerprint | None = None
    symptoms: list[NonEmpty] = Field(min_length=1)
    causes: list[NonEmpty] = Field(min_length=1)
    conditions: Conditions = Field(default_factory=Conditions)
    checklist: list[NonEmpty] = Field(min_length=1)
    fix: Fix
    response: Response | None = Field(
        default=None, description="What a scheduler should do: retry as is, elsewhere, or not; required when stable."
    )
    commands: list[Command] = Field(default_factory=list)
    related: list[Related] = Field(default_factory=list)
    references: list[Reference] = Field(default_factory=list)
    examples: Examples

    _since = field_validator("since")(classmethod(lambda cls, v: _check_since(v)))

    @property
    def primary_signature(self) -> Signature:
        return self.signatures[0]


class Tombstone(_Strict):
    """What stays of a retired entry: its id keeps pointing at the entry that replaced it."""

    id: EntryId
    title: Annotated[str, Field(min_length=5, max_length=120)]
    status: Literal["removed"]
    since: str
    replaced_by: EntryId | None = Field(default=None, description="The entry that took over; pages redirect there.")
    reason: NonEmpty

    _since = field_validator("since")(classmethod(lambda cls, v: _check_since(v)))

    @model_validator(mode="after")
    def _not_self(self) -> Tombstone:
        if self.replaced_by == self.id:
            raise ValueError("replaced_by must name another entry")
        return self


AnyEntry = Entry | Tombstone


def is_valid_id(value: str) -> bool:
    return bool(_ID_RE.match(value)) and 3 <= len(value) <= 80
