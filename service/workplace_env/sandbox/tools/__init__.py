"""The 27 workplace tools, one module per toolkit; importing this package registers them all."""

from workplace_env.sandbox.tools import (  # noqa: F401  (imported to register their tools)
    analytics,
    calendar,
    crm,
    directory,
    email,
    project_management,
)
from workplace_env.sandbox.tools.registry import TOOLS, Tool, drop_nulls, encode_output, execute

# The reference advertises its toolkits in this order (tool_schemas.json); within a toolkit,
# tools keep their definition order.
_TOOLKIT_ORDER = (
    "company_directory_",
    "email_",
    "calendar_",
    "analytics_",
    "project_management_",
    "customer_relationship_manager_",
)


def advertised_tools() -> list[Tool]:
    """All tools in the order the reference advertises them to the model."""
    rank = {name: i for i, name in enumerate(TOOLS)}

    def key(spec: Tool) -> tuple[int, int]:
        kit = next(i for i, p in enumerate(_TOOLKIT_ORDER) if spec.name.startswith(p))
        return kit, rank[spec.name]

    return sorted(TOOLS.values(), key=key)


__all__ = ["TOOLS", "Tool", "advertised_tools", "drop_nulls", "encode_output", "execute"]
