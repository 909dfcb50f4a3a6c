"""Placements as objects, in DTensor's words: Shard(dim), Replicate(), Partial(op)."""
import operator


class Placement:
    """A placement of one mesh dim; str() is dtr's text form ("S(0)", "R", "P(sum)")."""

    __slots__ = ()

    def __repr__(self):
        return self.__class__.__name__ + "(" + ", ".join(repr(a) for a in self._args()) + ")"

    def _args(self):
        return ()

    def __eq__(self, other):
        return type(self) is type(other) and self._args() == other._args()

    def __hash__(self):
        return hash((type(self).__name__,) + self._args())

    def is_shard(self, dim=None):
        return False

    def is_replicate(self):
        return False

    def is_partial(self):
        return False


class Shard(Placement):
    """Each rank of the mesh dim holds one chunk of tensor dim `dim` (torch.chunk's rule);
    with `sizes`, a ragged shard: the rank at coordinate c of the mesh dim holds sizes[c]
    of it, one size per rank, summing to the length it splits ("S(0){3,0,5,2}")."""

    __slots__ = ("dim", "sizes")

    def __init__(self, dim, sizes=None):
        from . import _core  # (an ArgumentError is a TypeError too)
        if not isinstance(dim, int) or isinstance(dim, bool):
            raise _core.ArgumentError(f"Shard: dim must be an int, got {type(dim).__name__}")
        self.dim = dim
        self.sizes = None
        if sizes is not None:
            try:
                sizes = tuple(sizes)
            except TypeError:
                raise _core.ArgumentError(
                    f"Shard: sizes must be a sequence of ints, got {type(sizes).__name__}"
                ) from None
            checked = []
            for i, n in enumerate(sizes):
                try:  # (ints and numpy's integers; not bools, floats or text)
                    v = operator.index(n) if not isinstance(n, bool) else None
                except TypeError:
                    v = None
                if v is None or v < 0 or v > 1 << 40:
                    raise _core.ArgumentError(
                        f"Shard({dim}): sizes[{i}] is {n!r}, must be an int 0..2^40")
                checked.append(v)
            sizes = tuple(checked)
            if not sizes:
                raise _core.ArgumentError(f"Shard({dim}): sizes is empty (one size per rank "
                                          "of the mesh dim)")
            self.sizes = sizes

    def _args(self):
        return (self.dim,) if self.sizes is None else (self.dim, self.sizes)

    def __repr__(self):
        if self.sizes is None:
            return f"Shard({self.dim!r})"
        return f"Shard({self.dim!r}, sizes={self.sizes!r})"

    def __str__(self):
        if self.sizes is None:
            return f"S({self.dim})"
        return f"S({self.dim}){{{','.join(str(n) for n in self.sizes)}}}"

    def is_shard(self, dim=None):
        return dim is None or dim == self.dim


class Replicate(Placement):
    """Every rank of the mesh dim holds the whole (of what the other dims leave)."""

    __slots__ = ()

    def _args(self):
        return ()

    def __str__(self):
        return "R"

    def is_replicate(self):
        return True


class Partial(Placement):
    """Each rank holds a contribution; the tensor is their reduction by `reduce_op`
    ("sum", "avg", "max", "min", "product")."""

    __slots__ = ("reduce_op",)

    _OPS = ("sum", "avg", "max", "min", "product", "prod")

    def __init__(self, reduce_op="sum"):
        if not isinstance(reduce_op, str):
            from . import _core
            raise _core.ArgumentError(
                f"Partial: reduce_op must be a str, got {type(reduce_op).__name__}")
        if reduce_op.strip().lower() not in self._OPS:  # ("" would read as P(), a sum)
            from . import _core
            raise _core.ArgumentError(
                f"Partial: reduce_op {reduce_op!r} is not sum, avg, max, min or product")
        self.reduce_op = reduce_op

    def _args(self):
        return (self.reduce_op,)

    def __str__(self):
        return f"P({self.reduce_op})"

    def is_partial(self):
        return True


def placement_text(p):
    """dtr's text of one placement: dtr's own objects, or torch's (Shard, Replicate,
    Partial, _StridedShard) by their fields; None for anything else."""
    if isinstance(p, (Shard, Replicate, Partial)):
        return str(p)
    if isinstance(p, Placement):  # the base, or a subclass dtr does not know: no text
        return None
    name = type(p).__name__
    if name == "_StridedShard" and hasattr(p, "split_factor"):
        return f"_S({p.dim}, {p.split_factor})"
    if name == "Shard" and hasattr(p, "dim"):
        return f"S({p.dim})"
    if name == "Replicate":
        return "R"
    if name in ("Partial", "_Partial", "_NormPartial") and hasattr(p, "reduce_op"):
        op = str(getattr(p.reduce_op, "name", p.reduce_op)).lower()
        return f"P({op})"
    return None
