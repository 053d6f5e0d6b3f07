"""The tools that log and report progress before their result, served alike by the official SDK
(py_tool_server.py) and by FastMCP (fastmcp_server.py): each framework finds the context
parameter by its own `Context` class, so the tools are made for the one given.

`track` logs and reports progress, then answers {"parcel": parcel, "at": "Berlin"}; `survey`
reports progress — more than 64 KiB of it — then fails (an isError result).
"""


def depot_tools(Context):
    async def track(parcel: str, ctx: Context) -> dict[str, str]:
        """Find a parcel, saying so on the way."""
        await ctx.info(f"looking up {parcel}")
        await ctx.report_progress(1, 2, "found the depot")
        await ctx.debug("asked the depot")
        await ctx.report_progress(2, 2, "found the parcel")
        return {"parcel": parcel, "at": "Berlin"}

    async def survey(parcel: str, ctx: Context) -> dict[str, str]:
        """Ask every depot, then give up."""
        for depot in range(40):
            await ctx.report_progress(depot, 40, f"depot {depot}: " + "no sign of it. " * 120)
        raise ValueError(f"{parcel} is lost")

    return [track, survey]
