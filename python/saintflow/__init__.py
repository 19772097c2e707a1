"""saintflow from Python: memory-mapped graph stores, GraphSAINT samplers that feed
PyTorch / PyTorch Geometric models, and saintflow's own training.

    import saintflow as sf
    store = sf.Store.open("cora.sf")
    for batch in sf.SaintSampler(store, kind="rw", batch_size=300, walk_length=2):
        ...                      # batch.x, batch.edge_index, batch.node_norm, ...
    for batch in sf.LinkSampler(split_store, kind="edge", batch_size=500, negatives=5):
        ...                      # batch.edge_label_index, batch.edge_label, ...
    result = sf.train("gcn", store, epochs=20)   # a shipped plan by name, or a file

The engine is the Rust library (``saintflow._native``); this package adds argument
handling and the PyTorch / PyG adapters. Every error is a :class:`SaintflowError`.
"""

from ._native import (
    PlanError,
    SaintflowError,
    SampleError,
    StoreError,
    TrainError,
    __version__,
    sampler_kinds,
)
from .ops import check_op_gradients, register_op, registered_ops
from .sampler import Batch, LinkBatch, LinkSampler, SaintSampler
from .store import HeldOutLinks, NodeIdError, Store
from .training import EmbeddingResult, Plan, TrainResult, embed, eval_embedding, plans, train

__all__ = [
    "Batch",
    "EmbeddingResult",
    "HeldOutLinks",
    "LinkBatch",
    "LinkSampler",
    "NodeIdError",
    "Plan",
    "PlanError",
    "SaintSampler",
    "SaintflowError",
    "SampleError",
    "Store",
    "StoreError",
    "TrainError",
    "TrainResult",
    "__version__",
    "check_op_gradients",
    "embed",
    "eval_embedding",
    "plans",
    "register_op",
    "registered_ops",
    "sampler_kinds",
    "train",
]
