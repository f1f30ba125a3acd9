"""ASTResolver: whether an expression's AST (a name or a chain of attributes, `qd.lang.ops.atomic_add`)
names a given Python object in a scope, as Quadrants code checks it (quadrants.lang.ast.symbol_resolver)."""
import ast


class ASTResolver:
    @staticmethod
    def resolve_value(node, scope):
        """The object `node` (ast.Name or ast.Attribute of those) names in `scope` (a dict, or an object
        whose attributes are the names); raises LookupError when it names nothing."""
        if isinstance(node, ast.Name):
            if isinstance(scope, dict):
                if node.id not in scope:
                    raise LookupError(node.id)
                return scope[node.id]
            try:
                return getattr(scope, node.id)
            except AttributeError:
                raise LookupError(node.id) from None
        if isinstance(node, ast.Attribute):
            base = ASTResolver.resolve_value(node.value, scope)
            try:
                return getattr(base, node.attr)
            except AttributeError:
                raise LookupError(node.attr) from None
        raise LookupError(type(node).__name__)

    @staticmethod
    def resolve_to(node, wanted, scope):
        """Whether `node` names exactly the object `wanted` (by identity) in `scope`."""
        try:
            return ASTResolver.resolve_value(node, scope) is wanted
        except LookupError:
            return False
