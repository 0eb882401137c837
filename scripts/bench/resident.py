#!/usr/bin/env python3
"""Where a running process's resident memory is (issue 15, RSS): per mapped file, and for one ELF
file (default: the process's executable) per section, from /proc/PID/smaps and /proc/PID/pagemap.

  scripts/bench/resident.py PID [ELF]        needs root (pagemap's present bits)

Prints the resident KiB of each mapped file (its Rss over all its mappings, largest first); for
the ELF file, the resident KiB of each allocated section of 16 KiB or more (over all its mappings),
so that one sees whether the code, the relocations or the Swift metadata are what is mapped; and
the resident bytes of `.text` by the module its symbols belong to.
"""
import collections, os, re, struct, subprocess, sys


def per_file(pid):
    rss, cur = collections.Counter(), None
    for line in open(f"/proc/{pid}/smaps"):
        m = re.match(r"^[0-9a-f]+-[0-9a-f]+ (\S+) \S+ \S+ \S+\s*(.*)$", line)
        if m:
            cur = f"{m.group(2) or '[anon]'} {m.group(1)}"
        elif line.startswith("Rss:"):
            rss[cur] += int(line.split()[1])
    return rss


def sections(elf):
    """The allocated sections of `elf` as (file offset, size, name, address), by offset."""
    out = subprocess.run(["readelf", "-SW", elf], capture_output=True, text=True, check=True).stdout
    found = []
    for m in re.finditer(r"\]\s+(\S+)\s+\S+\s+([0-9a-f]{16})\s+([0-9a-f]+)\s+([0-9a-f]+)\s+\S+\s+(\S*A\S*)", out):
        name, addr, off, size = m.group(1), int(m.group(2), 16), int(m.group(3), 16), int(m.group(4), 16)
        if size:
            found.append((off, size, name, addr))
    return sorted(found)


def present_pages(pid, start, end):
    with open(f"/proc/{pid}/pagemap", "rb") as pm:
        pm.seek(start // 4096 * 8)
        data = pm.read((end - start) // 4096 * 8)
    return [(struct.unpack_from("<Q", data, i * 8)[0] >> 63) & 1 for i in range(len(data) // 8)]


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    pid = int(sys.argv[1])
    elf = os.path.realpath(sys.argv[2] if len(sys.argv) > 2 else f"/proc/{pid}/exe")
    rss = per_file(pid)
    print(f"pid {pid}: {sum(rss.values())} KiB resident; by mapping (KiB):")
    for k, v in rss.most_common(25):
        print(f"  {v:7d}  {k}")
    print(f"{elf}, by section (resident KiB of the section's pages, all its mappings):")
    maps = []
    for line in open(f"/proc/{pid}/maps"):
        f = line.split()
        if len(f) >= 6 and os.path.realpath(f[5]) == elf:
            a, b = (int(x, 16) for x in f[0].split("-"))
            maps.append((a, b, int(f[2], 16)))
    resident = {}
    for a, b, off in maps:
        for i, bit in enumerate(present_pages(pid, a, b)):
            resident[off // 4096 + i] = resident.get(off // 4096 + i, 0) | bit
    secs = sections(elf)
    for off, size, name, _ in secs:
        pages = range(off // 4096, (off + size + 4095) // 4096)
        kib = 4 * sum(resident.get(p, 0) for p in pages)
        if size >= 16 * 1024:
            print(f"  {name:30s} {size // 1024:8d} KiB, {kib:6d} KiB resident")
    print(f"{elf}, resident code by owner (the symbols' bytes on resident pages of .text, KiB):")
    for owner, kib in text_owners(elf, secs, resident).most_common(20):
        print(f"  {kib:7.0f}  {owner}")


def owner(symbol):
    """The module a symbol belongs to: a Swift mangled name's first module, the Swift standard
    library, the Swift runtime, other C++, or else C (the name does not tell which library)."""
    m = re.match(r"^\$s(s|\d+)", symbol)
    if m:
        if m.group(1) == "s":
            return "Swift (stdlib)"
        n = int(m.group(1))
        start = m.end()
        return symbol[start:start + n]
    if symbol.startswith("_ZN5swift") or symbol.startswith("swift_") or symbol.startswith("_swift"):
        return "Swift runtime (C++)"
    if symbol.startswith("_Z"):
        return "C++ (other)"
    return "C (other)"


def text_owners(elf, secs, resident):
    """Resident KiB of .text per symbol owner; `secs` from `sections`, `resident` maps file page
    numbers to present bits."""
    text_off, text_size, _, text_addr = next(s for s in secs if s[2] == ".text")
    text = (text_off, text_size)
    delta = text_addr - text_off  # address minus file offset
    syms = []
    for line in subprocess.run(["nm", "--defined-only", "-n", elf], capture_output=True, text=True).stdout.splitlines():
        f = line.split()
        if len(f) == 3 and f[1] in "tTwW":
            syms.append((int(f[0], 16) - delta, f[2]))
    counts = collections.Counter()
    for (off, name), (next_off, _) in zip(syms, syms[1:] + [(text[0] + text[1], "")]):
        if not (text[0] <= off < text[0] + text[1]):
            continue
        for page in range(off // 4096, (max(next_off, off + 1) - 1) // 4096 + 1):
            if resident.get(page):
                lo, hi = max(off, page * 4096), min(next_off, (page + 1) * 4096)
                if hi > lo:
                    counts[owner(name)] += (hi - lo) / 1024
    return counts


if __name__ == "__main__":
    main()
