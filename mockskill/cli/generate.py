"""``mockskill generate``: a failure pack (a scenario file) from Skill Descriptors.

The pack itself is :mod:`mockskill.recording.failure_packs`'; this command reads the
descriptor (a file, a URL, standard input) or a ``/skills`` listing (each descriptor
fetched from its ``descriptor_url``), refuses an invalid one with the validator's
violations as ``check-descriptor`` prints them (exit 1, no file written), checks that
what it made loads, and writes it.
"""

from __future__ import annotations

import urllib.parse
from pathlib import Path
from typing import Any

import click

from ..protocol.validator import validate, validation_error
from .options import UNREADABLE
from .sources import fetch, read_json, source_url


@click.command()
@click.argument("source", metavar="DESCRIPTOR.json|URL|-")
@click.option(
    "--out",
    type=click.Path(dir_okay=False, writable=True, path_type=Path),
    default=None,
    help="Write the pack to this file (default: standard output).",
)
def generate(source: str, out: Path | None) -> None:
    """Write a scenario with a named case for every way the skills of a descriptor can fail.

    SOURCE is a Skill Descriptor (a JSON file, an http(s) URL, or - for standard
    input) or a skill listing such as GET /skills (each descriptor is fetched from
    its descriptor_url). A test picks a case per request with the header
    Mockskill-Case: NAME, or plays the cases in order without it (docs/generate.md).
    Exit code 0 written, 1 an invalid descriptor (its violations printed, nothing
    written), 2 a mistyped command line, 3 could not read (no such file, connection
    refused, an HTTP error, not JSON).
    """
    # On first use: the other commands (serve's start above all) do not pay for them.
    from ..audit.cases import named_cases
    from ..protocol import jsonstyle
    from ..recording.failure_packs import generate as generate_pack
    from ..scenario.loader import load_text
    from ..scenario.problems import ScenarioError

    descriptors = _descriptors(source)
    invalid = [(where, validate(d)) for where, d in descriptors]
    invalid = [(where, violations) for where, violations in invalid if violations]
    if invalid:
        for where, violations in invalid:
            if len(descriptors) > 1:
                click.echo(f"{where}:", err=True)
            click.echo(jsonstyle.dumps(validation_error(violations)))
        said = "an invalid descriptor" if len(invalid) == 1 else f"{len(invalid)} invalid ones"
        click.echo(f"mockskill: {source} has {said}; nothing was written", err=True)
        raise SystemExit(1)
    ids = [d["id"] for _, d in descriptors]
    twice = sorted({i for i in ids if ids.count(i) > 1})
    if twice:
        click.echo(f"mockskill: skill ids listed twice: {', '.join(twice)}", err=True)
        raise SystemExit(1)
    text = generate_pack([d for _, d in descriptors], _shown(source))
    try:
        # (named as what it is: the --out file is not written, so no position is in it)
        pack = load_text(text, f"<the pack for {_shown(source)}>")
    except ScenarioError as exc:  # a descriptor valid but not servable (e.g. its id)
        click.echo(f"mockskill: the pack for {source} would not load:\n{exc}", err=True)
        raise SystemExit(1) from None
    if out is None:
        click.echo(text, nl=False)
        return
    try:
        out.write_text(text, encoding="utf-8")
    except OSError as exc:
        click.echo(f"mockskill: cannot write {out}: {exc.strerror or exc}", err=True)
        raise SystemExit(1) from None
    cases = len(named_cases(pack.skills))
    click.echo(f"wrote {out}: {len(descriptors)} skill(s), {cases} named cases", err=True)


def _shown(source: str) -> str:
    """The source as the pack's first comment names it: a file by its name alone (the
    same descriptor gives the same bytes wherever it lies), a URL whole, as given."""
    return source if source == "-" or source_url(source) else Path(source).name


def _descriptors(source: str) -> list[tuple[str, Any]]:
    """The descriptors *source* holds: itself, or those its listing names, each with
    where it came from; exit 3 (a sentence, no traceback) when one cannot be read."""
    document = read_json(source)
    if not _is_listing(document):
        return [(source, document)]
    found = []
    base = source_url(source)
    for item in document["skills"]:
        named = item["descriptor_url"]
        try:
            url = urllib.parse.urljoin(base or "", named)
            relative = not urllib.parse.urlsplit(url).scheme
        except ValueError as exc:  # an unclosed IPv6 bracket
            click.echo(f"mockskill: the listing at {source} names {named!r}: {exc}", err=True)
            raise SystemExit(UNREADABLE) from None
        if base is None and relative:
            click.echo(
                f"mockskill: the listing in {source} names descriptor_url {url!r}, relative"
                " to a URL it was not read from: give the listing by its URL",
                err=True,
            )
            raise SystemExit(UNREADABLE)
        found.append((url, read_json(url, fetch)))
    if not found:
        click.echo(f"mockskill: the listing at {source} has no skills", err=True)
        raise SystemExit(1)
    return found


def _is_listing(document: Any) -> bool:
    """A skill listing (``GET /skills``): ``{"skills": [{..., "descriptor_url"}, ...]}``."""
    skills = document.get("skills") if isinstance(document, dict) else None
    return isinstance(skills, list) and all(
        isinstance(s, dict) and isinstance(s.get("descriptor_url"), str) for s in skills
    )
