"""Kernels for reading id columns: pack variable-length ids into rows, find query runs."""

from __future__ import annotations

import numpy as np
from numba import njit, prange


@njit(cache=True, parallel=True)
def pack_ids(data, offsets, out, row0):  # type: ignore[no-untyped-def]
    """Copy variable-length ids (UTF-8 ``data[offsets[i]:offsets[i+1]]``) into zero-padded rows
    ``out[row0 + i]`` (the rows must start zeroed or be fully overwritten: this pads)."""
    n = offsets.shape[0] - 1
    width = out.shape[1]
    for i in prange(n):
        s = offsets[i]
        m = offsets[i + 1] - s
        for t in range(m):
            out[row0 + i, t] = data[s + t]
        for t in range(m, width):
            out[row0 + i, t] = 0


@njit(cache=True)
def segment_starts(data, offsets):  # type: ignore[no-untyped-def]
    """Rows whose variable-length id (``data[offsets[i]:offsets[i+1]]``) differs from the
    previous row's: the starts of runs of equal ids (row 0 always starts one)."""
    n = offsets.shape[0] - 1
    flags = np.zeros(n, dtype=np.bool_)
    for i in range(n):
        if i == 0:
            flags[i] = True
            continue
        a, b = offsets[i - 1], offsets[i]
        la, lb = b - a, offsets[i + 1] - b
        if la != lb:
            flags[i] = True
            continue
        for t in range(la):
            if data[a + t] != data[b + t]:
                flags[i] = True
                break
    return np.flatnonzero(flags)


# --- TREC text files (runs and qrels), parsed the way trec_eval's get_*.c read them ---------

@njit(cache=True, inline="always")
def _is_space(b):  # type: ignore[no-untyped-def]
    # C isspace() in the "C" locale: what trec_eval splits columns on
    return b == 32 or (9 <= b <= 13)


#: 1e0 .. 1e22, every one exact in float64 (a table lookup, not a pow() call per number)
_POW10 = np.array([10.0 ** k for k in range(23)])


@njit(cache=True, inline="always")
def _parse_number(buf, s, e, as_int):  # type: ignore[no-untyped-def]
    """(value, ok) of the decimal token buf[s:e]; ok is False where Python must decide
    (exponent overflow, too many digits, inf/nan words, junk): only exactly-rounded fast
    paths are taken here (Clinger: mantissa < 2**53 and |power of ten| <= 22)."""
    neg = False
    p = s
    if p < e and (buf[p] == 45 or buf[p] == 43):
        neg = buf[p] == 45
        p += 1
    mant = 0
    digits = 0
    frac = 0
    seen_dot = False
    any_digit = False
    while p < e:
        b = buf[p]
        if 48 <= b <= 57:
            any_digit = True
            if mant == 0 and b == 48:
                if seen_dot:
                    frac += 1
            else:
                if digits >= 18:
                    return 0.0, False
                mant = mant * 10 + (b - 48)
                digits += 1
                if seen_dot:
                    frac += 1
        elif b == 46 and not seen_dot and not as_int:
            seen_dot = True
        else:
            break
        p += 1
    if not any_digit:
        return 0.0, False
    exp = 0
    if p < e and (buf[p] == 101 or buf[p] == 69) and not as_int:
        p += 1
        eneg = False
        if p < e and (buf[p] == 45 or buf[p] == 43):
            eneg = buf[p] == 45
            p += 1
        if p >= e:
            return 0.0, False
        while p < e:
            b = buf[p]
            if not (48 <= b <= 57) or exp > 1000:
                return 0.0, False
            exp = exp * 10 + (b - 48)
            p += 1
        if eneg:
            exp = -exp
    if p != e:
        return 0.0, False
    if as_int:
        if mant >= 2147483648:
            return 0.0, False
        v = float(mant)
        return (-v if neg else v), True
    power = exp - frac
    if mant >= 9007199254740992 or power > 22 or power < -22:
        return 0.0, False
    v = float(mant)
    if power > 0:
        v = v * _POW10[power]
    elif power < 0:
        v = v / _POW10[-power]
    return (-v if neg else v), True


@njit(cache=True)
def _scan_part(buf, lo, hi, base, min_cols, max_cols, key_col, id_col, num_col, as_int,
               check_col, ids, vals, ok, new_key, key_s, key_n):  # type: ignore[no-untyped-def]
    """Scan the lines of ``buf[lo:hi]`` (whole lines) into rows ``base, base + 1, ...``.

    Column ``id_col`` is copied into the zero-padded row ``ids[r]`` (cut at its width; the
    longest length seen is returned so the caller can rescan wider). Where the key changes,
    ``new_key[r]`` is set and the key's span is appended at ``key_s/key_n[base + j]`` (the
    part's j-th key: written densely, so a 10M-row file touches a few pages, not all).
    Returns (rows, error line within the part (1-based, 0 = none), columns found on it or -1
    when ``check_col`` is not a number, start and end of the last row's key, longest
    ``id_col`` token, keys appended)."""
    width = ids.shape[1]
    n = 0
    ns = 0
    id_max = 0
    prev_key_s = -1
    prev_key_e = -1
    line = 0
    p = lo
    while p < hi:
        line += 1
        s = p
        while s < hi and buf[s] != 10 and _is_space(buf[s]):
            s += 1
        if s >= hi:
            break
        if buf[s] == 10:  # blank line
            p = s + 1
            continue
        if buf[s] == 35:  # comment
            while s < hi and buf[s] != 10:
                s += 1
            p = s + 1
            continue
        r = base + n
        cols = 0
        q = s
        k0 = 0
        k1 = 0
        while True:
            f = q
            while q < hi and not _is_space(buf[q]):
                q += 1
            if cols == key_col:
                k0 = f
                k1 = q
            if cols == id_col:
                m = q - f
                id_max = max(id_max, m)
                m = min(m, width)
                for t in range(m):
                    ids[r, t] = buf[f + t]
                for t in range(m, width):
                    ids[r, t] = 0
            if cols == num_col:
                v, good = _parse_number(buf, f, q, as_int)
                # where Python must parse the token, the value slot holds its byte offset
                vals[r] = v if good else float(f)
                ok[r] = good
            if cols == check_col:
                c0 = buf[f]
                c1 = buf[f + 1] if q - f > 1 else 0
                if not (48 <= c0 <= 57 or ((c0 == 45 or c0 == 43) and 48 <= c1 <= 57)):
                    return n, line, -1, prev_key_s, prev_key_e, id_max, ns
            cols += 1
            if max_cols <= 0 and cols >= min_cols:  # trec_eval ignores later run columns
                while q < hi and buf[q] != 10:
                    q += 1
                break
            while q < hi and buf[q] != 10 and _is_space(buf[q]):
                q += 1
            if q >= hi or buf[q] == 10:
                break
        if cols < min_cols or (max_cols > 0 and cols > max_cols):
            return n, line, cols, prev_key_s, prev_key_e, id_max, ns
        same = prev_key_e - prev_key_s == k1 - k0
        if same:
            for t in range(k1 - k0):
                if buf[k0 + t] != buf[prev_key_s + t]:
                    same = False
                    break
        new_key[r] = not same
        if not same:
            key_s[base + ns] = k0
            key_n[base + ns] = k1 - k0
            ns += 1
        prev_key_s = k0
        prev_key_e = k1
        n += 1
        p = q + 1
    return n, 0, 0, prev_key_s, prev_key_e, id_max, ns


@njit(cache=True, parallel=True)
def scan_trec_lines(buf, min_cols, max_cols, key_col, id_col, num_col, as_int, check_col,
                    parts, width):  # type: ignore[no-untyped-def]
    """Parse a whitespace-separated TREC file (``buf``: its bytes), ``parts`` pieces at once.

    Skips blank lines and comment lines (first non-blank character ``#``). Every other line
    (a row) must hold ``min_cols`` columns or more (at most ``max_cols`` when ``max_cols > 0``).
    Per row: column ``id_col`` copied into a zero-padded ``width``-byte row (one pass, no
    spans kept: the bytes written per row are what reading a big run costs), and column
    ``num_col`` parsed (a float, or an integer when ``as_int``; where ``ok`` is False the
    caller must parse the token, whose byte offset the number slot then holds). Per run of
    rows sharing ``key_col`` (a query): its first row and the key's span. Column ``check_col``
    (``-1``: none) must start like a number (a TREC run's rank: a doc id holding whitespace
    shifts the columns, and this is where it shows).

    Returns (id rows, longest id (> ``width``: ids were cut, scan again that wide), numbers,
    ok, segment first rows, key starts, key lengths, rows, segments, error line (1-based,
    0 = none), columns found on it (-1: ``check_col`` is not a number, -2: a NUL byte), any
    non-ASCII byte).
    """
    size = buf.shape[0]
    bounds = np.empty(parts + 1, dtype=np.int64)
    bounds[0] = 0
    bounds[parts] = size
    for k in range(1, parts):  # each piece starts at a line start
        b = max(size * k // parts, bounds[k - 1])
        while 0 < b < size and buf[b - 1] != 10:
            b += 1
        bounds[k] = b
    newlines = np.zeros(parts, dtype=np.int64)
    highs = np.zeros(parts, dtype=np.int64)
    nuls = np.zeros(parts, dtype=np.int64)
    for k in prange(parts):
        # branch-free counts (LLVM vectorises them): rows to allocate, non-ASCII, NUL bytes
        c = 0
        h = 0
        z = 0
        for i in range(bounds[k], bounds[k + 1]):
            b = buf[i]
            c += b == 10
            h |= b
            z += b == 0
        newlines[k] = c
        highs[k] = h
        nuls[k] = z
    nonascii = highs.max() >= 128
    # a piece holds at most (its newlines) lines, the last one one more (no final newline)
    cap = newlines.copy()
    cap[parts - 1] += 1
    first_line = np.zeros(parts, dtype=np.int64)  # lines before each piece
    for k in range(1, parts):
        first_line[k] = first_line[k - 1] + newlines[k - 1]
    total = first_line[parts - 1] + cap[parts - 1]
    empty = np.empty(0, dtype=np.int64)
    if nuls.sum():
        # a NUL would vanish in the zero-padded id rows ("d1\0" == "d1"): never an id byte
        nul_line = 1
        for i in range(size):
            if buf[i] == 0:
                break
            nul_line += buf[i] == 10
        return (np.empty((0, width), dtype=np.uint8), 0, np.empty(0),
                np.empty(0, dtype=np.bool_), empty, empty, empty, 0, 0, nul_line, -2, nonascii)
    ids = np.empty((total, width), dtype=np.uint8)  # every byte of a row is written
    vals = np.empty(total, dtype=np.float64)
    ok = np.ones(total, dtype=np.bool_)
    new_key = np.zeros(total, dtype=np.bool_)
    key_s = np.empty(total, dtype=np.int64)  # per part, its keys from its first row on:
    key_n = np.empty(total, dtype=np.int64)  # pages past them are never touched
    rows = np.zeros(parts, dtype=np.int64)
    err_line = np.zeros(parts, dtype=np.int64)
    err_cols = np.zeros(parts, dtype=np.int64)
    last_s = np.zeros(parts, dtype=np.int64)
    last_e = np.zeros(parts, dtype=np.int64)
    id_max = np.zeros(parts, dtype=np.int64)
    nkeys = np.zeros(parts, dtype=np.int64)
    for k in prange(parts):
        n, el, ec, ls, le, im, nk = _scan_part(buf, bounds[k], bounds[k + 1], first_line[k],
                                           min_cols, max_cols, key_col, id_col, num_col,
                                           as_int, check_col, ids, vals, ok, new_key, key_s,
                                           key_n)
        rows[k] = n
        err_line[k] = el
        err_cols[k] = ec
        last_s[k] = ls
        last_e[k] = le
        id_max[k] = im
        nkeys[k] = nk
    for k in range(parts):
        if err_line[k]:
            return (ids, 0, vals, ok, empty, empty, empty, 0, 0, first_line[k] + err_line[k],
                    err_cols[k], nonascii)
    # a query that spans two pieces starts only once: drop the later piece's first key
    skip = np.zeros(parts, dtype=np.int64)
    prev = -1
    for k in range(parts):
        if rows[k] == 0:
            continue
        r = first_line[k]  # the piece's first row and its first key (always a new one)
        if prev >= 0 and last_e[prev] - last_s[prev] == key_n[r]:
            same = True
            for t in range(key_n[r]):
                if buf[key_s[r] + t] != buf[last_s[prev] + t]:
                    same = False
                    break
            if same:
                new_key[r] = False
                skip[k] = 1
        prev = k
    # close the gaps blank and comment lines left between pieces (none in a typical run)
    n = 0
    for k in range(parts):
        src = first_line[k]
        if src != n:
            for i in range(rows[k]):
                ids[n + i, :] = ids[src + i, :]
                vals[n + i] = vals[src + i]
                ok[n + i] = ok[src + i]
                new_key[n + i] = new_key[src + i]
        n += rows[k]
    nseg = 0
    for k in range(parts):
        nseg += nkeys[k] - skip[k]
    seg_row = np.empty(nseg, dtype=np.int64)
    seg_s = np.empty(nseg, dtype=np.int64)
    seg_n = np.empty(nseg, dtype=np.int64)
    j = 0
    for k in range(parts):
        for i in range(first_line[k] + skip[k], first_line[k] + nkeys[k]):
            seg_s[j] = key_s[i]
            seg_n[j] = key_n[i]
            j += 1
    j = 0
    for i in range(n):
        if new_key[i]:
            seg_row[j] = i
            j += 1
    return (ids, id_max.max(), vals, ok, seg_row, seg_s, seg_n, n, nseg, 0, 0, nonascii)


@njit(cache=True, parallel=True)
def pack_spans(buf, span_s, span_n, out):  # type: ignore[no-untyped-def]
    """Copy ``buf[span_s[i]:span_s[i]+span_n[i]]`` into zero-padded rows ``out[i]``."""
    width = out.shape[1]
    for i in prange(out.shape[0]):
        s = span_s[i]
        m = span_n[i]
        for t in range(m):
            out[i, t] = buf[s + t]
        for t in range(m, width):
            out[i, t] = 0
