"""Models agentkit can build locally, offline: the embedded default model for ``agentkit run``."""

from agentkit.models._smollm2 import CACHE_ENV as CACHE_ENV
from agentkit.models._smollm2 import INSTALL_COMMAND as INSTALL_COMMAND
from agentkit.models._smollm2 import ensure_smollm2 as ensure_smollm2
from agentkit.models._smollm2 import find_smollm2_gguf as find_smollm2_gguf
from agentkit.models._smollm2 import models_cache_dir as models_cache_dir
from agentkit.models._smollm2 import smollm2_cache_dir as smollm2_cache_dir

__all__ = [
    "CACHE_ENV",
    "INSTALL_COMMAND",
    "ensure_smollm2",
    "find_smollm2_gguf",
    "models_cache_dir",
    "smollm2_cache_dir",
]
