"""What the steps returned that a diagnosis reports beside its verdict.

Contract: `Found` (`diagnose.found`) holds the facts every step reads: the verdict, the runs, the repro in hand.
What one step finds for the report alone is that step's typed result, and `Reported.of(results)` reads each off
the procedure's results by the name of the step that returns it (`STEP_OF`: one table, checked against
`diagnose.procedure.STEPS` by the tests); `diagnose.frozen` writes them into the `Diagnosis`. A step that did not run,
or found nothing, leaves its field empty. Where the first failure did not repeat (`Found.set_aside`), what was drawn
from it (the owner's hand-over, the control, the upgrade verified on its repro, the runtime triage of its step, what
the export path found) is not reported.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pt2doctor.model.compiler_settings import SettingSearch
from pt2doctor.model.diagnosis import Bisection, Control, Workaround
from pt2doctor.model.export import ExportFinding
from pt2doctor.model.runtime import NeedsCompiler, RuntimeTriage
from pt2doctor.model.source_refs import SourceRef
from pt2doctor.model.versions import VersionsResult


@dataclass(frozen=True)
class Replayed:
    """replay.py for the recorded failing frame (`diagnose.narrowing.replay`): whether it failed the same way alone
    in a fresh interpreter."""

    path: str
    verified: bool = False


@dataclass(frozen=True)
class HandOver:
    """The owner's hand-over (`diagnose.hand_over`, the export path's own): every workaround tried on a copy of the
    script, the verified one last; the compiler settings searched on the minimal graph or the reduced program; what
    `CompilerBisector` blamed."""

    workarounds: tuple[Workaround, ...] = ()
    settings: SettingSearch | None = None
    bisection: Bisection | None = None


@dataclass(frozen=True)
class ExportConcluded:
    """The export path concluded (`export.diagnose.steps`): what it found, its hand-over and where to look (which the
    procedure's own steps for them, after it, do not look for), its one-op control where AOTInductor failed."""

    finding: ExportFinding | None = None
    hand_over: HandOver = HandOver()
    where_to_look: tuple[SourceRef, ...] = ()
    control: Control | None = None


@dataclass(frozen=True)
class Upgrade:
    """repro.py under other torch releases (`diagnose.upgrade`, `--versions`); `upgrade`: "upgrade torch to X",
    verified on the repro, where a later release passes."""

    versions: VersionsResult
    upgrade: Workaround | None = None


# The steps whose result each field is, the first that returned one: the runtime triage is its step's, or, for a
# failure that did not repeat, the result the first run's repeat concluded with (`diagnose.procedure._triage_flaky`).
STEP_OF = {"replay": ("replay",), "needs_compiler": ("needs_compiler",), "hand_over": ("hand_over",),
           "export": ("export",), "upgrade": ("versions",), "where_to_look": ("where_to_look",),
           "runtime": ("runtime_triage", "reproduce", "repeated"), "control": ("control",)}
SET_ASIDE = ("hand_over", "control", "versions", "runtime_triage", "export")  # drawn from a failure that did not repeat


@dataclass(frozen=True)
class Reported:
    replay: Replayed | None = None
    needs_compiler: NeedsCompiler | None = None
    hand_over: HandOver = HandOver()
    upgrade: Upgrade | None = None
    where_to_look: tuple[SourceRef, ...] = field(default=())
    runtime: RuntimeTriage | None = None
    control: Control | None = None  # the one-op program of the failing kind, where one ran (`diagnose.control`)
    export: ExportFinding | None = None  # a failure in torch.export / AOTInductor (`export.diagnose.steps`)

    @classmethod
    def of(cls, results: Mapping[str, Any], set_aside: bool = False) -> Reported:
        skipped = SET_ASIDE if set_aside else ()

        def result(name: str, kind: type) -> Any:
            steps = (step for step in STEP_OF[name] if step not in skipped)
            return next((v for step in steps if isinstance(v := results.get(step), kind)), None)

        export = result("export", ExportConcluded)
        return cls(replay=result("replay", Replayed), needs_compiler=result("needs_compiler", NeedsCompiler),
                   hand_over=result("hand_over", HandOver) or (export.hand_over if export else HandOver()),
                   upgrade=result("upgrade", Upgrade),
                   where_to_look=result("where_to_look", tuple) or (export.where_to_look if export else ()),
                   runtime=result("runtime", RuntimeTriage),
                   control=result("control", Control) or (export.control if export else None),
                   export=export.finding if export else None)

    @property
    def workarounds(self) -> tuple[Workaround, ...]:
        """Every workaround tried, the upgrade of torch (verified on the repro) first."""
        upgrade = self.upgrade.upgrade if self.upgrade is not None else None
        return ((upgrade,) if upgrade is not None else ()) + self.hand_over.workarounds
