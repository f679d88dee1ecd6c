"""Tokenizers rebuilt from a GGUF file's ``tokenizer.ggml.*`` metadata, in pure Python.

Two kinds, as llama.cpp reads them from the same metadata [LLAMA-CPP] ``src/llama-vocab.cpp``:

* :class:`ByteBPETokenizer` (``tokenizer.ggml.model = "gpt2"``; SmolLM2): GPT-2 byte-level BPE
  [GPT2-BPE]. The text is split into words by the pre-tokenizer (``tokenizer.ggml.pre``:
  ``gpt2``, or ``smollm``, which first isolates every numeric character), each word's UTF-8 bytes
  are mapped to printable characters (GPT-2's byte-to-unicode table) and the ranked merges
  (``tokenizer.ggml.merges``, lowest rank first, leftmost first on ties) are applied.
* :class:`SentencePieceTokenizer` (``tokenizer.ggml.model = "llama"``; Gemma): SentencePiece BPE
  [SENTENCEPIECE] driven by piece scores (``tokenizer.ggml.scores``): spaces become ``▁``
  (U+2581), the text starts as single characters, and the adjacent pair whose concatenation is a
  vocabulary piece with the highest score (leftmost on ties) is merged until none is left;
  characters that are no piece become byte tokens ``<0xXX>``.

Both first cut out the vocabulary's user-defined pieces (and, with ``special=True``, its control
pieces such as ``<bos>``), longest first, and encode the text between them. The pre-tokenizer's
character classes (letters ``\\p{L}``, numbers ``\\p{N}``, Unicode ``White_Space``) come from
Python's ``unicodedata`` (the Unicode version of the running Python).

Internal to the package: :class:`ByteBPETokenizer`, :class:`SentencePieceTokenizer`,
:func:`tokenizer_from_metadata`, :func:`gpt2_split`.
"""

from __future__ import annotations

import heapq
import unicodedata
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from ._gguf import UnsupportedModelError

__all__ = [
    "ByteBPETokenizer",
    "SentencePieceTokenizer",
    "TokenType",
    "bytes_to_unicode",
    "gpt2_split",
    "tokenizer_from_metadata",
]


class TokenType:
    """``tokenizer.ggml.token_type`` values (llama.cpp's ``llama_token_type``)."""

    UNDEFINED = 0
    NORMAL = 1
    UNKNOWN = 2
    CONTROL = 3
    USER_DEFINED = 4
    UNUSED = 5
    BYTE = 6


# Unicode White_Space (PropList.txt): what \s means in the pre-tokenizer's expression.
_WHITE_SPACE = frozenset(
    "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008"
    "\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)
_CONTRACTIONS = ("s", "t", "re", "ve", "m", "ll", "d")
_SPM_SPACE = "\u2581"


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible map from the 256 byte values to printable characters.

    Bytes that are printable Latin-1 characters (``!``..``~``, ``¡``..``¬``, ``®``..``ÿ``) map to
    themselves; the other 68 map, in increasing byte order, to ``chr(256)``, ``chr(257)``, ...

    Returns:
        byte value -> one-character string.
    """
    keep = [*range(0x21, 0x7F), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    table: dict[int, str] = {b: chr(b) for b in keep}
    extra = 0
    for b in range(256):
        if b not in table:
            table[b] = chr(256 + extra)
            extra += 1
    return table


def _char_class(ch: str) -> str:
    """'L' letter, 'N' number, 'S' white space, 'O' anything else."""
    if ch in _WHITE_SPACE:
        return "S"
    cat = unicodedata.category(ch)[0]
    return cat if cat in "LN" else "O"


def gpt2_split(text: str, *, isolate_numbers: bool = False) -> list[str]:
    """Split text into words with GPT-2's pre-tokenizer expression.

    The expression is ``'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|
    \\s+(?!\\S)|\\s+``: contractions, an optional space plus a run of letters, of numbers or of
    other characters, and runs of white space (a run followed by a word leaves its last space to
    that word). It is evaluated here by a scanner over character classes, equal to the
    expression's leftmost-first semantics.

    Args:
        text: the text.
        isolate_numbers: first cut every numeric character (``\\p{N}``) out as its own word
            (the ``smollm`` pre-tokenizer).

    Returns:
        The words; their concatenation is ``text``.
    """
    if isolate_numbers:
        words: list[str] = []
        start = 0
        for i, ch in enumerate(text):
            if _char_class(ch) == "N":
                if i > start:
                    words += gpt2_split(text[start:i])
                words.append(ch)
                start = i + 1
        if start < len(text):
            words += gpt2_split(text[start:])
        return words
    cls = [_char_class(ch) for ch in text]
    n = len(text)
    out: list[str] = []
    i = 0
    while i < n:
        ch = text[i]
        if ch == "'":
            hit = next((c for c in _CONTRACTIONS if text.startswith(c, i + 1)), None)
            if hit is not None:
                out.append(text[i : i + 1 + len(hit)])
                i += 1 + len(hit)
                continue
        p = i + 1 if ch == " " and i + 1 < n else i
        kind = cls[p]
        if kind in "LNO" and (p == i or cls[i] == "S"):
            j = p + 1
            while j < n and cls[j] == kind:
                j += 1
            out.append(text[i:j])
            i = j
            continue
        # White space: a run that ends the text is one word; a run before a non-space keeps its
        # last character for the next word (\s+(?!\S)), unless the run is one character (\s+).
        j = i + 1
        while j < n and cls[j] == "S":
            j += 1
        if j < n and j - i > 1:
            j -= 1
        out.append(text[i:j])
        i = j
    return out


class _Vocab:
    """Shared parts: the piece table, special-piece partitioning, BOS/EOS."""

    def __init__(
        self,
        tokens: Sequence[str],
        token_types: npt.ArrayLike | None,
        *,
        bos_id: int | None,
        eos_id: int | None,
        add_bos: bool,
    ) -> None:
        self.tokens = list(tokens)
        n = len(self.tokens)
        types = (
            np.full(n, TokenType.NORMAL, dtype=np.int32)
            if token_types is None
            else np.asarray(token_types, dtype=np.int32)
        )
        if types.shape != (n,):
            raise ValueError(f"{types.shape[0]} token types for {n} tokens")
        self.token_types = types
        # Later duplicates win, as in llama.cpp's text -> id map.
        self.piece_to_id = {t: i for i, t in enumerate(self.tokens)}
        self.bos_id = bos_id
        self.eos_id = eos_id
        self.add_bos = bool(add_bos)
        special_types = (TokenType.CONTROL, TokenType.USER_DEFINED, TokenType.UNKNOWN)
        order = sorted(
            (i for i in range(n) if types[i] in special_types),
            key=lambda i: (-len(self.tokens[i]), i),
        )
        self._user_pieces = [
            (self.tokens[i], i) for i in order if types[i] == TokenType.USER_DEFINED
        ]
        self._all_special = [(self.tokens[i], i) for i in order if self.tokens[i]]

    @property
    def vocab_size(self) -> int:
        """Number of pieces."""
        return len(self.tokens)

    def _partition(self, text: str, special: bool) -> list[str | int]:
        """Cut special pieces out of ``text``: strings are raw text, ints are token ids."""
        parts: list[str | int] = [text] if text else []
        for piece, tid in self._all_special if special else self._user_pieces:
            if not any(isinstance(p, str) and piece in p for p in parts):
                continue
            nxt: list[str | int] = []
            for p in parts:
                if not isinstance(p, str) or piece not in p:
                    nxt.append(p)
                    continue
                chunks = p.split(piece)
                for k, chunk in enumerate(chunks):
                    if k:
                        nxt.append(tid)
                    if chunk:
                        nxt.append(chunk)
            parts = nxt
        return parts

    def _encode_text(self, text: str, out: list[int]) -> None:
        raise NotImplementedError

    def encode(
        self, text: str, *, add_bos: bool | None = None, special: bool = False
    ) -> npt.NDArray[np.int64]:
        """Token ids of ``text``.

        Args:
            text: the text.
            add_bos: prepend the BOS token; None uses the file's ``add_bos_token`` flag.
            special: also recognise control pieces written in the text (``<|im_start|>``,
                ``<bos>``); by default they are encoded as plain text.

        Returns:
            int64 ``(T,)`` token ids.
        """
        if not isinstance(text, str):
            raise TypeError(f"encode expects a str, got {type(text).__name__}")
        out: list[int] = []
        if (self.add_bos if add_bos is None else add_bos) and self.bos_id is not None:
            out.append(self.bos_id)
        for part in self._partition(text, special):
            if isinstance(part, int):
                out.append(part)
            else:
                self._encode_text(part, out)
        return np.asarray(out, dtype=np.int64)

    def _piece_bytes(self, tid: int) -> bytes:
        raise NotImplementedError

    def decode(self, ids: npt.ArrayLike, *, skip_control: bool = True) -> str:
        """Text of token ids (invalid UTF-8 sequences become U+FFFD).

        Args:
            ids: int token ids, any 1-D sequence.
            skip_control: leave out control tokens (BOS, EOS, ``<|im_start|>``...).

        Returns:
            The text.
        """
        arr = np.asarray(ids, dtype=np.int64).reshape(-1)
        if arr.size and (arr.min() < 0 or arr.max() >= self.vocab_size):
            raise ValueError(f"token ids must lie in [0, {self.vocab_size})")
        buf = bytearray()
        for tid in arr.tolist():
            if skip_control and self.token_types[tid] == TokenType.CONTROL:
                continue
            buf += self._piece_bytes(tid)
        return buf.decode("utf-8", errors="replace")


class ByteBPETokenizer(_Vocab):
    """GPT-2 byte-level BPE with ranked merges (see the module docstring).

    Args:
        tokens: the pieces (byte-mapped strings), index = token id.
        token_types: :class:`TokenType` per piece.
        merges: ``"left right"`` strings, rank = position.
        pre: pre-tokenizer name, ``"gpt2"`` or ``"smollm"``.
        bos_id, eos_id: special ids (or None).
        add_bos: whether :meth:`encode` prepends BOS by default.
    """

    PRE_TOKENIZERS = ("gpt2", "smollm")

    def __init__(
        self,
        tokens: Sequence[str],
        token_types: npt.ArrayLike | None,
        merges: Sequence[str],
        *,
        pre: str = "gpt2",
        bos_id: int | None = None,
        eos_id: int | None = None,
        add_bos: bool = False,
    ) -> None:
        super().__init__(tokens, token_types, bos_id=bos_id, eos_id=eos_id, add_bos=add_bos)
        if pre not in self.PRE_TOKENIZERS:
            raise ValueError(
                f"pre-tokenizer {pre!r} is not implemented; supported: "
                f"{', '.join(self.PRE_TOKENIZERS)}"
            )
        self.pre = pre
        self.ranks: dict[tuple[str, str], int] = {}
        for rank, m in enumerate(merges):
            cut = m.find(" ", 1)
            if cut < 0:
                raise ValueError(f"merge {rank} {m!r} is not 'left right'")
            self.ranks.setdefault((m[:cut], m[cut + 1 :]), rank)
        self.byte_map = bytes_to_unicode()
        self.byte_unmap = {c: b for b, c in self.byte_map.items()}
        self._cache: dict[str, list[int]] = {}

    def _bpe(self, word: str) -> list[int]:
        syms = [self.byte_map[b] for b in word.encode("utf-8")]
        ranks = self.ranks
        while len(syms) > 1:
            best, at = None, -1
            for i in range(len(syms) - 1):
                r = ranks.get((syms[i], syms[i + 1]))
                if r is not None and (best is None or r < best):
                    best, at = r, i
            if best is None:
                break
            syms[at : at + 2] = [syms[at] + syms[at + 1]]
        ids: list[int] = []
        for s in syms:
            tid = self.piece_to_id.get(s)
            if tid is not None:
                ids.append(tid)
            else:
                # A merge result that is no piece: fall back to its single byte characters.
                ids += [self.piece_to_id[c] for c in s if c in self.piece_to_id]
        return ids

    def _encode_text(self, text: str, out: list[int]) -> None:
        for word in gpt2_split(text, isolate_numbers=self.pre == "smollm"):
            ids = self._cache.get(word)
            if ids is None:
                ids = self._bpe(word)
                if len(self._cache) < 100_000:
                    self._cache[word] = ids
            out += ids

    def _piece_bytes(self, tid: int) -> bytes:
        piece = self.tokens[tid]
        if self.token_types[tid] == TokenType.NORMAL:
            unmap = self.byte_unmap
            if all(c in unmap for c in piece):
                return bytes(unmap[c] for c in piece)
        return piece.encode("utf-8")


class SentencePieceTokenizer(_Vocab):
    """SentencePiece BPE over piece scores with byte fallback (see the module docstring).

    Args:
        tokens: the pieces, index = token id.
        scores: float score per piece (higher merges first).
        token_types: :class:`TokenType` per piece.
        bos_id, eos_id: special ids (or None).
        add_bos: whether :meth:`encode` prepends BOS by default.
        add_space_prefix: prepend a space to text that starts the input or follows a special
            piece (Llama 2 style); Gemma does not.
    """

    def __init__(
        self,
        tokens: Sequence[str],
        scores: npt.ArrayLike,
        token_types: npt.ArrayLike | None,
        *,
        bos_id: int | None = None,
        eos_id: int | None = None,
        add_bos: bool = True,
        add_space_prefix: bool = False,
    ) -> None:
        super().__init__(tokens, token_types, bos_id=bos_id, eos_id=eos_id, add_bos=add_bos)
        sc = np.asarray(scores, dtype=np.float32)
        if sc.shape != (len(self.tokens),):
            raise ValueError(f"{sc.shape[0]} scores for {len(self.tokens)} tokens")
        self.scores = sc
        self._score_list = sc.tolist()
        self.add_space_prefix = bool(add_space_prefix)
        self.byte_ids: list[int] = []
        for b in range(256):
            tid = self.piece_to_id.get(f"<0x{b:02X}>")
            if tid is None:
                raise ValueError(f"the vocabulary has no byte piece <0x{b:02X}>")
            self.byte_ids.append(tid)

    def _encode_text(self, text: str, out: list[int]) -> None:
        # Every raw-text part starts the input or follows a special piece: with the prefix on,
        # each gets its space (as llama.cpp does); Gemma has it off.
        if self.add_space_prefix:
            text = " " + text
        text = text.replace(" ", _SPM_SPACE)
        syms = list(text)
        n = len(syms)
        prev = list(range(-1, n - 1))
        nxt = [*range(1, n), -1]
        alive = [True] * n
        lookup = self.piece_to_id
        score = self._score_list
        heap: list[tuple[float, int, int, str]] = []

        def push(left: int, right: int) -> None:
            if left < 0 or right < 0:
                return
            merged = syms[left] + syms[right]
            tid = lookup.get(merged)
            if tid is not None:
                heapq.heappush(heap, (-score[tid], left, right, merged))

        for i in range(n - 1):
            push(i, i + 1)
        while heap:
            _, left, right, merged = heapq.heappop(heap)
            if not (alive[left] and alive[right]) or syms[left] + syms[right] != merged:
                continue
            syms[left] = merged
            alive[right] = False
            nxt[left] = nxt[right]
            if nxt[right] >= 0:
                prev[nxt[right]] = left
            push(prev[left], left)
            push(left, nxt[left])
        i = 0 if n else -1
        while i >= 0:
            tid = lookup.get(syms[i])
            if tid is not None:
                out.append(tid)
            else:
                out += [self.byte_ids[b] for b in syms[i].encode("utf-8")]
            i = nxt[i]

    def _piece_bytes(self, tid: int) -> bytes:
        piece = self.tokens[tid]
        if self.token_types[tid] == TokenType.BYTE:
            return bytes([int(piece[3:5], 16)])
        if self.token_types[tid] == TokenType.NORMAL:
            piece = piece.replace(_SPM_SPACE, " ")
        return piece.encode("utf-8")

    def decode(self, ids: npt.ArrayLike, *, skip_control: bool = True) -> str:
        text = super().decode(ids, skip_control=skip_control)
        if self.add_space_prefix and text.startswith(" "):
            text = text[1:]
        return text


def tokenizer_from_metadata(
    meta: Mapping[str, Any], label: str
) -> ByteBPETokenizer | SentencePieceTokenizer:
    """Build the tokenizer a GGUF file describes.

    Args:
        meta: the file's metadata (``tokenizer.ggml.*`` keys).
        label: the file, for messages.

    Returns:
        The tokenizer.

    Raises:
        UnsupportedModelError: the tokenizer model or pre-tokenizer is not implemented, or a
            required key is missing.
    """
    model = meta.get("tokenizer.ggml.model")
    tokens = meta.get("tokenizer.ggml.tokens")
    if model is None or tokens is None:
        raise UnsupportedModelError(f"{label}: the file carries no tokenizer (tokenizer.ggml.*)")

    def opt_id(key: str) -> int | None:
        v = meta.get(f"tokenizer.ggml.{key}")
        return None if v is None else int(v)

    types = meta.get("tokenizer.ggml.token_type")
    try:
        if model == "gpt2":
            pre = str(meta.get("tokenizer.ggml.pre", "gpt2"))
            if pre not in ByteBPETokenizer.PRE_TOKENIZERS:
                raise UnsupportedModelError(
                    f"{label}: BPE pre-tokenizer {pre!r} is not implemented; supported: "
                    f"{', '.join(ByteBPETokenizer.PRE_TOKENIZERS)}"
                )
            merges = meta.get("tokenizer.ggml.merges")
            if merges is None:
                raise UnsupportedModelError(f"{label}: BPE tokenizer without merges")
            return ByteBPETokenizer(
                tokens,
                types,
                merges,
                pre=pre,
                bos_id=opt_id("bos_token_id"),
                eos_id=opt_id("eos_token_id"),
                add_bos=bool(meta.get("tokenizer.ggml.add_bos_token", False)),
            )
        if model == "llama":
            scores = meta.get("tokenizer.ggml.scores")
            if scores is None:
                raise UnsupportedModelError(f"{label}: SentencePiece tokenizer without scores")
            return SentencePieceTokenizer(
                tokens,
                scores,
                types,
                bos_id=opt_id("bos_token_id"),
                eos_id=opt_id("eos_token_id"),
                add_bos=bool(meta.get("tokenizer.ggml.add_bos_token", True)),
                add_space_prefix=bool(meta.get("tokenizer.ggml.add_space_prefix", True)),
            )
    except ValueError as exc:
        raise UnsupportedModelError(f"{label}: {exc}") from None
    raise UnsupportedModelError(
        f"{label}: tokenizer model {model!r} is not implemented; supported: 'gpt2' (byte-level "
        "BPE) and 'llama' (SentencePiece BPE)"
    )
