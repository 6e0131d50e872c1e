"""A GraphQL query's cost as Shopify documents it for the GraphQL Admin API, before and after it runs.

From "Rate limiting GraphQL APIs by calculating query complexity" (Shopify
Engineering) and shopify.dev "GraphQL Admin API rate limits", "Cost calculation":

- a field returning a scalar or an enum costs 0;
- a field returning an object costs 1 (plus what is selected inside it);
- a connection costs 2, plus its size (``first`` or ``last``) times the cost of
  one of its objects (1, plus what is selected inside the node): nested
  connections multiply. ``edges``, ``node``, ``nodes``, ``cursor`` and
  ``pageInfo`` are the connection's own and cost nothing more;
- a connection needs ``first`` or ``last``.

The requested cost is computed from the query before it runs; the actual cost
from the answer: a connection counts the objects it returned, and an object
that came back null costs nothing inside it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from graphql import (
    FieldNode,
    FragmentSpreadNode,
    GraphQLObjectType,
    InlineFragmentNode,
    get_named_type,
    is_leaf_type,
)
from graphql.execution.values import get_argument_values

if TYPE_CHECKING:
    from graphql import FragmentDefinitionNode, GraphQLSchema, SelectionSetNode

#: A connection's own fields: what lies under them is the connection's objects (``edges { node }``, ``nodes``).
ITEMS = {"edges": "node", "nodes": ""}


class CostError(Exception):
    """A query Shopify refuses before running it (a connection without ``first`` or ``last``)."""


class Cost:
    """The cost of one operation of ``schema``, its fragments and variables given."""

    def __init__(self, schema: GraphQLSchema, fragments: dict[str, FragmentDefinitionNode],
                 variables: dict[str, Any]) -> None:
        self.schema, self.fragments, self.variables = schema, fragments, variables

    def requested(self, selections: SelectionSetNode, parent: GraphQLObjectType) -> int:
        total = 0
        for field, kind in self.fields(selections, parent):
            named = get_named_type(kind.fields[field.name.value].type)
            if is_leaf_type(named):
                continue
            assert isinstance(named, GraphQLObjectType) and field.selection_set is not None
            if is_connection(named):
                size = self.size(field, kind)
                total += 2 + size * self.each(field.selection_set, named, lambda s, t: self.requested(s, t))
            else:
                total += 1 + self.requested(field.selection_set, named)
        return total

    def actual(self, selections: SelectionSetNode, parent: GraphQLObjectType, data: dict[str, Any] | None) -> int:
        if data is None:
            return 0
        total = 0
        for field, kind in self.fields(selections, parent):
            named = get_named_type(kind.fields[field.name.value].type)
            key = field.alias.value if field.alias else field.name.value
            if is_leaf_type(named) or key not in data:
                continue
            assert isinstance(named, GraphQLObjectType) and field.selection_set is not None
            value = data[key]
            if value is None:
                continue
            if is_connection(named):
                total += 2 + self.returned(field.selection_set, named, value)
            else:
                total += 1 + self.actual(field.selection_set, named, value)
        return total

    # The parts.
    def size(self, field: FieldNode, parent: GraphQLObjectType) -> int:
        arguments = get_argument_values(parent.fields[field.name.value], field, self.variables)
        size = arguments.get("first") if arguments.get("first") is not None else arguments.get("last")
        if size is None:
            raise CostError("you must provide one of first or last")
        return int(size)

    def each(self, selections: SelectionSetNode, connection: GraphQLObjectType, cost: Any) -> int:
        """One object of the connection: 1, plus what is selected inside its node (``edges { node }`` or ``nodes``)."""
        inside = 0
        for _field, item, kind in self.items(selections, connection):
            inside += cost(item, kind)
        return 1 + inside

    def returned(self, selections: SelectionSetNode, connection: GraphQLObjectType, data: dict[str, Any]) -> int:
        """The objects a connection returned, each 1 plus what it holds: counted once, from edges or nodes."""
        counted: dict[int, int] = {}
        for field, item, kind in self.items(selections, connection):
            key = field.alias.value if field.alias else field.name.value
            for n, entry in enumerate(data.get(key) or []):
                node = entry.get("node") if field.name.value == "edges" else entry
                inside = self.actual(item, kind, node)
                counted[n] = counted.get(n, 0) + inside
        return sum(1 + inside for inside in counted.values())

    def items(self, selections: SelectionSetNode,
              connection: GraphQLObjectType) -> list[tuple[FieldNode, SelectionSetNode, GraphQLObjectType]]:
        """(the ``edges``/``nodes`` field, the node's selections, the node's type) for each selected."""
        found = []
        for field, kind in self.fields(selections, connection):
            name = field.name.value
            if name not in ITEMS or field.selection_set is None:
                continue
            holder = get_named_type(kind.fields[name].type)
            assert isinstance(holder, GraphQLObjectType)
            if name == "nodes":
                found.append((field, field.selection_set, holder))
                continue
            for inner, inner_kind in self.fields(field.selection_set, holder):
                if inner.name.value == "node" and inner.selection_set is not None:
                    node = get_named_type(inner_kind.fields["node"].type)
                    assert isinstance(node, GraphQLObjectType)
                    found.append((field, inner.selection_set, node))
        return found

    def fields(self, selections: SelectionSetNode,
               parent: GraphQLObjectType) -> list[tuple[FieldNode, GraphQLObjectType]]:
        """The fields selected on ``parent``, fragments spread, ``__typename`` left out."""
        found: list[tuple[FieldNode, GraphQLObjectType]] = []
        for selection in selections.selections:
            if isinstance(selection, FieldNode):
                if not selection.name.value.startswith("__"):
                    found.append((selection, parent))
            elif isinstance(selection, InlineFragmentNode):
                found += self.fields(selection.selection_set, parent)
            elif isinstance(selection, FragmentSpreadNode):
                found += self.fields(self.fragments[selection.name.value].selection_set, parent)
        return found


def is_connection(kind: GraphQLObjectType) -> bool:
    return kind.name.endswith("Connection")
