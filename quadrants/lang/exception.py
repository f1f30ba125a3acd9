"""The exception classes under the module path Quadrants code imports them from
(quadrants.lang.exception); they live in the bottom layer, quadrants.types.exceptions."""
from quadrants.types.exceptions import (  # noqa: F401
    QuadrantsAssertionError, QuadrantsCompilationError, QuadrantsIndexError, QuadrantsNameError,
    QuadrantsOutOfBoundsError, QuadrantsRuntimeError, QuadrantsRuntimeTypeError, QuadrantsSyntaxError,
    QuadrantsTypeError,
)
