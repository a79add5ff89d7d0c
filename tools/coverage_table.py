"""The present/missing table that tools/api_coverage.py writes for each reference library."""


def render_coverage(heading, summary, reference, rows):
    """Markdown: ``heading``, ``summary`` (with ``{have}`` and ``{total}`` filled in) and one row
    per (namespace title, reference names, present names, missing names)."""
    total = sum(len(r[1]) for r in rows)
    have = sum(len(r[2]) for r in rows)
    lines = [heading, "", summary.format(have=have, total=total), "",
             f"| namespace | {reference} names | present | missing | missing names |",
             "| --- | ---: | ---: | ---: | --- |"]
    for title, names, present, missing in rows:
        lines.append(f"| `{title}` | {len(names)} | {len(present)} | {len(missing)} | "
                     f"{', '.join(missing) or '-'} |")
    lines.append("")
    return "\n".join(lines)
