"""The workload: LinkBench's `config/FBWorkload.properties`, and the quirks switch.

`Workload` holds the published Facebook workload (operation mix, access
distributions, data sizes) plus the scale (`maxid1`). `quirks=True`
reproduces the reference implementation as it behaves; `quirks=False`
runs what its configuration evidently meant. The quirks that change the
workload (see README.md for all of them):

1. **Link counts per type.** `ID2Chooser.calcLinkCount` splits an id's
   out-degree over the link types with `leftOver = total - total / types`
   instead of `total % types`, so with 2 types an id with d >= 3 links gets
   `2 * (d // 2) + 2`: one or two more than drawn (961,966 links for ids
   1..4 instead of 961,965). The same count sizes the id2 ranges of requests.
2. **Write blending reads the read settings.** `Config.WRITE_UNCORR_CONFIG_PREFIX`
   is `"read_uncorr_"`, so link writes blend 99.5% (not 95%) uncorrelated
   accesses, drawn with the read shape 0.8 (not 0.741).
3. **Motif length ignored.** `MotifDataGenerator` tests `props.contains(key)`,
   which looks at *values*, so `*_motif_length = 128` never applies and every
   generator uses a 512-byte motif buffer (it changes which random numbers
   the data consumes, not the sizes).
4. **Multiget sizes start at 2.** `GeometricDistribution.quantile` returns
   `min + ceil(log(1 - r) / log(1 - p))`, and the ceiling is already >= 1, so
   with min = 1 a multiget asks for 2..127 ids (mean ~3.6 instead of the
   ~2.6 its comment aims at).
5. **Open-loop latency.** With a request rate, the reference times each
   request from when it actually started, hiding queueing delay (coordinated
   omission); the fixed mode times it from its intended start.
"""

from __future__ import annotations

from dataclasses import dataclass, field

#: LinkStore.DEFAULT_LINK_TYPE and DEFAULT_NODE_TYPE of the reference.
DEFAULT_LINK_TYPE = 123456789
DEFAULT_NODE_TYPE = 2048
RANGE_LIMIT = 10_000  # LinkStore.DEFAULT_LIMIT: rows per link-list query
MAX_LINK_DATA = 255
MAX_NODE_DATA = 1024 * 1024

#: Operation names, in the order of the reference's cumulative percentages.
ADD_LINK = "add_link"
DELETE_LINK = "delete_link"
UPDATE_LINK = "update_link"
COUNT_LINK = "count_link"
MULTIGET_LINK = "get_link"
GET_LINKS_LIST = "get_link_list"
ADD_NODE = "add_node"
UPDATE_NODE = "update_node"
DELETE_NODE = "delete_node"
GET_NODE = "get_node"
OPERATIONS = (
    ADD_LINK,
    DELETE_LINK,
    UPDATE_LINK,
    COUNT_LINK,
    MULTIGET_LINK,
    GET_LINKS_LIST,
    ADD_NODE,
    UPDATE_NODE,
    DELETE_NODE,
    GET_NODE,
)

#: FBWorkload.properties: percent of requests per operation.
FB_MIX: dict[str, float] = {
    ADD_LINK: 8.9886601,
    DELETE_LINK: 2.9907664,
    UPDATE_LINK: 8.0122125,
    COUNT_LINK: 4.8863567,
    MULTIGET_LINK: 0.5261142,
    GET_LINKS_LIST: 50.7119145,
    ADD_NODE: 2.5732789,
    UPDATE_NODE: 7.366437,
    DELETE_NODE: 1.0115914,
    GET_NODE: 12.9326683,
}


@dataclass(frozen=True)
class Datagen:
    """A `MotifDataGenerator` setting: bytes in [start, end], share of fresh chunks."""

    start: int
    end: int
    uniqueness: float
    motif_length: int | None = None  # None: the generator's default, 512


@dataclass(frozen=True)
class Workload:
    """Everything that shapes the load and the requests (FBWorkload.properties)."""

    maxid1: int = 100_001
    startid1: int = 1
    quirks: bool = True
    link_type_count: int = 2
    mix: dict[str, float] = field(default_factory=lambda: dict(FB_MIX))
    getlinklist_history: float = 0.3  # percent of link-list reads that page back
    link_datasize: float = 8.0  # median bytes
    node_datasize: float = 128.0
    link_add_datagen: Datagen = Datagen(32, 100, 0.225, 128)
    link_up_datagen: Datagen = Datagen(32, 100, 0.225, 128)
    node_add_datagen: Datagen = Datagen(50, 220, 0.63)
    node_up_datagen: Datagen = Datagen(50, 220, 0.63)
    read_shape: float = 0.8
    read_uncorr_blend: float = 99.5
    read_uncorr_shape: float = 0.8
    write_shape: float = 0.741
    write_uncorr_blend: float = 95.0
    write_uncorr_shape: float = 0.741
    node_read_shape: float = 0.625
    node_update_shape: float = 0.606
    multiget_min: int = 1
    multiget_max: int = 128
    multiget_prob: float = 0.382
    link_datasize_sigma: float = 1.0
    node_datasize_sigma: float = 1.0

    def __post_init__(self) -> None:
        if self.startid1 < 1 or self.maxid1 <= self.startid1:
            raise ValueError("need 1 <= startid1 < maxid1")
        if abs(sum(self.mix.values()) - 100.0) > 1e-5:
            raise ValueError(f"the operation mix adds up to {sum(self.mix.values())}, not 100")

    @property
    def effective_write_uncorr(self) -> tuple[float, float]:
        """(blend percent, Zipf shape) of uncorrelated link writes, per quirk 2."""
        if self.quirks:
            return self.read_uncorr_blend, self.read_uncorr_shape
        return self.write_uncorr_blend, self.write_uncorr_shape

    def motif_length(self, gen: Datagen) -> int:
        """The motif buffer a data generator really uses, per quirk 3."""
        if self.quirks or gen.motif_length is None:
            return 512
        return gen.motif_length

    def mode(self) -> str:
        return "quirks (reference behaviour)" if self.quirks else "fixed"
