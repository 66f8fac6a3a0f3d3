"""The base of every facts record: frozen and strict, a reading that is its value or why there is
none (`Unavailable`), and the number types a measurement may hold."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer

from gpuaccept.errors import excerpt


class Record(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


# What a measurement gives: a finite number (NaN or infinity in a facts file is damage, not a value);
# a time or a training rate is also above 0 (0 samples/s is no measurement, and would be divided by).
Finite = Annotated[float, Field(ge=0, allow_inf_nan=False)]
AboveZero = Annotated[float, Field(gt=0, allow_inf_nan=False)]
# Counts and sizes: no hardware gives a negative one. What a measurement is taken over (iterations,
# timed steps) and what a model is made of (layers, heads...) is at least 1: with 0 there is no measurement.
Count = Annotated[int, Field(ge=0)]
AtLeastOne = Annotated[int, Field(ge=1)]


class Unavailable(Record):
    """A fact the machine did not give: `reason` is a short code, `detail` says which call and why."""

    unavailable: Literal[
        "not_supported", "no_permission", "gpu_is_lost", "not_found", "timeout", "error", "not_installed", "not_probed"
    ]
    detail: str = ""

    def __str__(self) -> str:
        text = self.unavailable.replace("_", " ")
        return f"{text} ({self.detail})" if self.detail else text


def is_known(value: object) -> bool:
    return not isinstance(value, Unavailable)


def not_negative(cls: type[BaseModel], value: object) -> object:
    """A field validator for counts, sizes and indices (an `Unavailable` passes as it is)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value < 0:
        raise ValueError(f"must not be negative (got {excerpt(value)})")
    return value


# A reading: the value, or why there is none. Union order matters: pydantic tries the value first.
IntReading = int | Unavailable
StrReading = str | Unavailable
BoolReading = bool | Unavailable
FloatReading = float | Unavailable


def not_probed(detail: str = "") -> Unavailable:
    return Unavailable(unavailable="not_probed", detail=detail)


# What facts made from a command's text cannot tell, and facts recorded before a field existed
NOT_READ = "not read by this probe"
NOT_READ_DUMPED = {"unavailable": "not_probed", "detail": NOT_READ}


class OmitsLaterDefaults(Record):
    """A record whose fields added after files were first recorded are left out of its JSON while
    they hold their defaults: a facts file recorded before them reads and writes back unchanged."""

    later_fields: ClassVar[dict[str, Any]] = {}

    @model_serializer(mode="wrap")
    def _omit_later_defaults(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        for name, default in self.later_fields.items():
            if name in data and data[name] == default:
                del data[name]
        return data
