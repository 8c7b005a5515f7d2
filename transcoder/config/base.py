"""The base of every config model: unknown keys refused, frozen, each field's docstring its description, and every
problem of a config reported at once (a model's cross-field checks run on its valid fields even when others are
not)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Annotated, Any, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    TypeAdapter,
    ValidationError,
    ValidationInfo,
    ValidatorFunctionWrapHandler,
    model_validator,
)
from pydantic_core import InitErrorDetails


class StrictModel(BaseModel):
    """Every problem of a config is reported at once: a model's cross-field checks (`problems`) run on the fields
    that are valid even when others are not (pydantic runs `after` validators only once every field is valid)."""

    # A field's docstring is its description: the configuration reference is rendered from it (config.reference).
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    def problems(self) -> Iterator[str]:
        """This model's cross-field problems, in words. A check that needs a field that is not valid (absent
        from a partly valid model: AttributeError) ends the iteration; that field's own error is reported."""
        return iter(())

    @model_validator(mode="after")
    def _cross_fields(self) -> Self:
        found = list(self.problems())
        if found:
            raise ValidationError.from_exception_data(type(self).__name__, _value_errors(found, type(self).__name__))
        return self

    @model_validator(mode="wrap")
    @classmethod
    def _every_problem(cls, data: Any, handler: ValidatorFunctionWrapHandler, info: ValidationInfo) -> Any:
        try:
            return handler(data)
        except ValidationError as exc:
            errors = exc.errors(include_url=False)
            invalid = {e["loc"][0] for e in errors if e["loc"]}
            if not invalid or not isinstance(data, Mapping):  # no field invalid: the cross-field checks ran
                raise
            found = list(_partial_problems(cls, data, invalid, info.context))
            if not found:
                raise
            details = [InitErrorDetails(type=e["type"], loc=e["loc"], input=e["input"],
                                        **({"ctx": e["ctx"]} if "ctx" in e else {}))  # type: ignore[typeddict-item]
                       for e in errors]
            details += _value_errors(found, cls.__name__)
            try:
                merged = ValidationError.from_exception_data(cls.__name__, details)
            except (KeyError, TypeError, ValueError):  # an error type pydantic cannot rebuild: the original
                raise exc from None
            raise merged from None


def _value_errors(found: list[str], model: str, at: tuple[str, ...] = ()) -> list[InitErrorDetails]:
    """One error per problem found, each its own line when reported (config.problems). The input named is the
    model's name, never the values (a secret could be one)."""
    return [InitErrorDetails(type="value_error", loc=at, input=model, ctx={"error": ValueError(problem)})
            for problem in found]


def _partial_problems(cls: type[StrictModel], data: Mapping[str, Any], invalid: set[Any],
                      context: dict[str, Any] | None) -> Iterator[str]:
    """`cls`'s cross-field problems among its valid fields: each field of `data` not in `invalid` validated on its
    own, the others left out (a check needing one of them stops there)."""
    valid: dict[str, Any] = {}
    for name, field in cls.model_fields.items():
        if name in invalid or name not in data:
            continue
        # the field's type as built at run time: a type expression to pydantic, a plain value to a type checker
        annotated: Any = Annotated[field.annotation, field]
        try:
            valid[name] = TypeAdapter(annotated).validate_python(data[name], context=context)
        except ValidationError:
            continue
    partial = cls.model_construct(**valid)  # fields absent from data take their defaults; invalid ones are absent
    for name in cls.model_fields:
        if name in data and name not in valid:
            partial.__dict__.pop(name, None)
    found = partial.problems()
    while True:
        try:
            yield next(found)
        except (StopIteration, AttributeError):  # AttributeError: a field the check needs is not valid
            return
