# Type stubs of the saintflow package (the API as editors should complete it).
from os import PathLike
from typing import Any, Dict, Iterator, List, Literal, Mapping, Optional, Sequence, Tuple, Union, overload

import numpy as np
import numpy.typing as npt

_Path = Union[str, "PathLike[str]"]
_Ids = Union[Sequence[int], npt.ArrayLike]

__version__: str

class SaintflowError(Exception): ...

class PlanError(SaintflowError):
    file: str
    line: int
    col: int
    what: str

class StoreError(SaintflowError): ...
class NodeIdError(StoreError, IndexError): ...
class SampleError(SaintflowError): ...
class TrainError(SaintflowError): ...

def sampler_kinds() -> Dict[str, Dict[str, Optional[str]]]: ...

# Shipped plans by name (`plans()` lists them; a file of that name in the working
# directory would win). A name listed here is typed by its family (tests/cli_plans.rs
# checks each against the built-in plans); any other name or path gets the union.
_GnnPlanName = Literal[
    "appnp", "gae", "gat", "gcn", "gcnii", "gin", "graphsage", "graphsage_link",
    "graphsage_max", "jknet", "mixhop", "mlp", "rgcn", "rgcn_link", "sgc",
]
_EmbeddingPlanName = Literal["deepwalk", "line", "node2vec"]

def plans() -> List[Dict[str, Optional[str]]]: ...

class Store:
    @classmethod
    def open(cls, path: _Path) -> "Store": ...
    @classmethod
    def create(
        cls,
        path: _Path,
        edge_index: Any = ...,
        *,
        indptr: Optional[npt.ArrayLike] = ...,
        indices: Optional[npt.ArrayLike] = ...,
        x: Optional[npt.ArrayLike] = ...,
        y: Optional[npt.ArrayLike] = ...,
        train_mask: Optional[npt.ArrayLike] = ...,
        val_mask: Optional[npt.ArrayLike] = ...,
        test_mask: Optional[npt.ArrayLike] = ...,
        roles: Optional[npt.ArrayLike] = ...,
        n_nodes: Optional[int] = ...,
        symmetrize: bool = ...,
        force: bool = ...,
        train_graph: str = ...,
    ) -> "Store": ...
    @classmethod
    def import_graphsaint(cls, directory: _Path, path: _Path, *, standardize: bool = ..., force: bool = ...) -> "Store": ...
    @classmethod
    def from_pyg(cls, data: Any, path: _Path, *, symmetrize: bool = ..., force: bool = ..., train_graph: str = ...) -> "Store": ...
    @classmethod
    def from_dgl(cls, g: Any, path: _Path, *, symmetrize: bool = ..., force: bool = ..., train_graph: str = ...) -> "Store": ...
    def close(self) -> None: ...
    @property
    def closed(self) -> bool: ...
    def __enter__(self) -> "Store": ...
    def __exit__(self, *exc: Any) -> bool: ...
    @property
    def path(self) -> str: ...
    @property
    def n_nodes(self) -> int: ...
    @property
    def n_edges(self) -> int: ...
    @property
    def n_features(self) -> int: ...
    @property
    def n_classes(self) -> int: ...
    @property
    def multilabel(self) -> bool: ...
    def split(self, name: str) -> npt.NDArray[np.int64]: ...
    def roles(self) -> npt.NDArray[np.uint8]: ...
    def features(self, ids: _Ids) -> npt.NDArray[np.float32]: ...
    def features_view(self) -> npt.NDArray[np.float32]: ...
    def labels(self, ids: _Ids) -> np.ndarray: ...
    def csr(self, graph: str = ...) -> Tuple[npt.NDArray[np.uint64], npt.NDArray[np.uint32]]: ...
    def edge_index(self, graph: str = ...) -> npt.NDArray[np.int64]: ...
    def to_torch(self, graph: str = ...) -> Dict[str, Any]: ...
    def to_pyg(self, graph: str = ...) -> Any: ...
    def info(self) -> Dict[str, Any]: ...
    def check(self) -> None: ...
    @property
    def has_link_split(self) -> bool: ...
    def link_info(self) -> Optional[Dict[str, Any]]: ...
    def link_split(self, name: str) -> "HeldOutLinks": ...
    def split_edges(
        self,
        path: _Path,
        *,
        val: float = ...,
        test: float = ...,
        negatives: int = ...,
        seed: int = ...,
        allow_isolated: bool = ...,
        by_time: bool = ...,
        force: bool = ...,
    ) -> "Store": ...

class HeldOutLinks:
    name: str
    pos_edge_index: npt.NDArray[np.int64]
    neg_dst: npt.NDArray[np.int64]
    neg_edge_index: npt.NDArray[np.int64]
    given: bool
    @property
    def num_positives(self) -> int: ...
    @property
    def negatives(self) -> int: ...
    @property
    def edge_label_index(self) -> npt.NDArray[np.int64]: ...
    @property
    def edge_label(self) -> npt.NDArray[np.float32]: ...
    def to_torch(self) -> Dict[str, Any]: ...

class Batch:
    index: int
    n_id: npt.NDArray[np.int64]
    indptr: npt.NDArray[np.int64]
    indices: npt.NDArray[np.int64]
    edge_index: npt.NDArray[np.int64]
    x: npt.NDArray[np.float32]
    y: np.ndarray
    roles: npt.NDArray[np.uint8]
    node_norm: Optional[npt.NDArray[np.float32]]
    edge_norm: Optional[npt.NDArray[np.float32]]
    hetero: Optional[Dict[str, Any]]
    @property
    def num_nodes(self) -> int: ...
    @property
    def num_edges(self) -> int: ...
    @property
    def train_mask(self) -> npt.NDArray[np.bool_]: ...
    @property
    def val_mask(self) -> npt.NDArray[np.bool_]: ...
    @property
    def test_mask(self) -> npt.NDArray[np.bool_]: ...
    def to_torch(self) -> Dict[str, Any]: ...
    def to_pyg(self) -> Any: ...
    def to_hetero(self) -> Any: ...

class SaintSampler:
    store: Store
    def __init__(
        self,
        store: Union[Store, _Path],
        kind: str = ...,
        *,
        graph: str = ...,
        seed: int = ...,
        threads: Optional[int] = ...,
        num_steps: Optional[int] = ...,
        sample_coverage: float = ...,
        clip: Optional[int] = ...,
        **keys: Union[int, float, bool, None],
    ) -> None: ...
    def __iter__(self) -> Iterator[Batch]: ...
    def __len__(self) -> int: ...
    def __getitem__(self, index: int) -> Batch: ...
    def batches(self, first: int, count: int) -> Iterator[Batch]: ...
    def subgraph(self, index: int, seed: Optional[int] = ...) -> Batch: ...
    @property
    def num_steps(self) -> int: ...
    @property
    def threads(self) -> int: ...
    @property
    def kind(self) -> str: ...
    @property
    def pre_sampled(self) -> int: ...
    @property
    def norm_seed(self) -> int: ...
    def node_counts(self) -> Optional[npt.NDArray[np.uint32]]: ...
    def edge_counts(self) -> Optional[npt.NDArray[np.uint32]]: ...

class LinkBatch(Batch):
    edge_label_index: npt.NDArray[np.int64]
    edge_label: npt.NDArray[np.float32]
    edge_label_weight: Optional[npt.NDArray[np.float32]]
    num_positives: int
    negatives: int
    @property
    def pos_weight(self) -> Optional[npt.NDArray[np.float32]]: ...
    @property
    def src_index(self) -> npt.NDArray[np.int64]: ...
    @property
    def dst_pos_index(self) -> npt.NDArray[np.int64]: ...
    @property
    def dst_neg_index(self) -> npt.NDArray[np.int64]: ...
    @property
    def neg_dst(self) -> npt.NDArray[np.int64]: ...

class LinkSampler(SaintSampler):
    def __init__(
        self,
        store: Union[Store, _Path],
        kind: str = ...,
        *,
        targets: float = ...,
        negatives: int = ...,
        negative_sampler: str = ...,
        negative_ends: str = ...,
        exclude_true: bool = ...,
        exclude_targets: bool = ...,
        require_split: bool = ...,
        graph: str = ...,
        seed: int = ...,
        threads: Optional[int] = ...,
        num_steps: Optional[int] = ...,
        sample_coverage: float = ...,
        clip: Optional[int] = ...,
        **keys: Union[int, float, bool, None],
    ) -> None: ...
    def __iter__(self) -> Iterator[LinkBatch]: ...
    def __getitem__(self, index: int) -> LinkBatch: ...
    def batches(self, first: int, count: int) -> Iterator[LinkBatch]: ...
    def subgraph(self, index: int, seed: Optional[int] = ...) -> LinkBatch: ...
    @property
    def link(self) -> Dict[str, Any]: ...

_Overrides = Union[Mapping[str, Any], Sequence[str], None]

class Plan:
    @classmethod
    def load(cls, path: _Path, overrides: _Overrides = ...) -> "Plan": ...
    @property
    def path(self) -> str: ...
    @property
    def is_embedding(self) -> bool: ...

class TrainResult:
    val: Optional[Dict[str, float]]
    test: Optional[Dict[str, float]]
    best_epoch: int
    epochs: int
    steps: int
    stopped_at: Optional[int]
    records: List[Dict[str, Any]]
    history: List[Dict[str, Any]]
    @property
    def losses(self) -> List[float]: ...

class EmbeddingResult:
    embedding: npt.NDArray[np.float32]
    summary: Dict[str, Any]
    samples: int
    seconds: float
    samples_per_s: float
    last_loss: float

@overload
def train(
    plan: _GnnPlanName,
    store: Union[Store, _Path],
    *,
    epochs: Optional[int] = ...,
    seed: int = ...,
    threads: Optional[int] = ...,
    checkpoint: Optional[_Path] = ...,
    resume: bool = ...,
    force: bool = ...,
    log: Optional[_Path] = ...,
    progress: bool = ...,
    max_steps: Optional[int] = ...,
    overrides: _Overrides = ...,
    output: Optional[_Path] = ...,
    holdout: float = ...,
    memory_mib: int = ...,
) -> TrainResult: ...
@overload
def train(
    plan: _EmbeddingPlanName,
    store: Union[Store, _Path],
    *,
    epochs: Optional[int] = ...,
    seed: int = ...,
    threads: Optional[int] = ...,
    checkpoint: Optional[_Path] = ...,
    resume: bool = ...,
    force: bool = ...,
    log: Optional[_Path] = ...,
    progress: bool = ...,
    max_steps: Optional[int] = ...,
    overrides: _Overrides = ...,
    output: Optional[_Path] = ...,
    holdout: float = ...,
    memory_mib: int = ...,
) -> EmbeddingResult: ...
@overload
def train(
    plan: Union[Plan, _Path],
    store: Union[Store, _Path],
    *,
    epochs: Optional[int] = ...,
    seed: int = ...,
    threads: Optional[int] = ...,
    checkpoint: Optional[_Path] = ...,
    resume: bool = ...,
    force: bool = ...,
    log: Optional[_Path] = ...,
    progress: bool = ...,
    max_steps: Optional[int] = ...,
    overrides: _Overrides = ...,
    output: Optional[_Path] = ...,
    holdout: float = ...,
    memory_mib: int = ...,
) -> Union[TrainResult, EmbeddingResult]: ...
def embed(
    plan: Union[Plan, _Path],
    store: Union[Store, _Path],
    checkpoint: _Path,
    *,
    output: Optional[_Path] = ...,
    last: bool = ...,
    logits: bool = ...,
    threads: Optional[int] = ...,
    memory_mib: int = ...,
    scratch_dir: Optional[_Path] = ...,
    overrides: _Overrides = ...,
    force: bool = ...,
) -> npt.NDArray[np.float32]: ...
def eval_embedding(
    embedding: Union[npt.ArrayLike, _Path],
    store: Union[Store, _Path],
    *,
    ratios: Sequence[float] = ...,
    repeats: int = ...,
    seed: int = ...,
    c: float = ...,
    normalize: bool = ...,
    holdout: Optional[float] = ...,
    threads: Optional[int] = ...,
    split: Optional[str] = ...,
) -> Any: ...

def register_op(
    name: str,
    forward: Any,
    backward: Any = ...,
    *,
    arity: int = ...,
    attrs: Sequence[str] = ...,
    doc: str = ...,
) -> None: ...
def check_op_gradients(name: str, cols: int = ..., **attrs: Union[float, str, bool]) -> None: ...
def registered_ops() -> List[str]: ...
