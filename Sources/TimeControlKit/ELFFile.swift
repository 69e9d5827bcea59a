#if canImport(Glibc)
import Glibc
#endif
import SystemPackage

/// What timectl needs to know about an executable before preloading the
/// shim into it: whether it has a dynamic loader at all, which libraries it
/// needs, and whether it is a Go program (which reads clocks without libc).
/// Reads only the headers it needs, with pread.
struct ELFFile {
    enum Kind {
        case elf64
        case elf32
        case script(interpreter: String)
        case other
    }

    let kind: Kind
    /// PT_INTERP: the dynamic loader; nil for a static executable.
    var interpreter: String? = nil
    /// DT_NEEDED entries.
    var needed: [String] = []
    /// A PT_NOTE owned by "Go" (the Go toolchain's build id).
    var isGo = false

    init(path: String) throws(TimeControlError) {
        let fd: FileDescriptor
        do {
            fd = try FileDescriptor.open(FilePath(path), .readOnly, options: [.closeOnExec])
        } catch {
            throw .system(call: "open", path: path, errno: error as? Errno ?? .ioError)
        }
        defer { try? fd.close() }
        let reader = Reader(fd: fd)
        let ident = reader.bytes(at: 0, count: 64)
        if ident.starts(with: [0x23, 0x21]) {  // "#!"
            kind = Self.scriptInterpreter(ident: reader.bytes(at: 0, count: 256)).map { .script(interpreter: $0) } ?? .other
            return
        }
        guard ident.count >= 64, ident.starts(with: [0x7F, 0x45, 0x4C, 0x46]) else {
            kind = .other
            return
        }
        guard ident[4] == 2, ident[5] == 1 else {  // ELFCLASS64, little-endian
            kind = .elf32
            return
        }
        kind = .elf64
        let phoff = reader.u64(ident, 0x20)
        let phentsize = Int(reader.u16(ident, 0x36))
        let phnum = Int(reader.u16(ident, 0x38))
        guard phentsize >= 56, phnum < 4096 else { return }
        let table = reader.bytes(at: phoff, count: phentsize * phnum)
        guard table.count == phentsize * phnum else { return }

        var loads: [(vaddr: UInt64, offset: UInt64, size: UInt64)] = []
        var dynamic: (offset: UInt64, size: UInt64)?
        for index in 0..<phnum {
            let base = index * phentsize
            let type = reader.u32(table, base)
            let offset = reader.u64(table, base + 8)
            let vaddr = reader.u64(table, base + 16)
            let fileSize = reader.u64(table, base + 32)
            switch type {
            case 1: loads.append((vaddr, offset, fileSize))  // PT_LOAD
            case 2: dynamic = (offset, fileSize)  // PT_DYNAMIC
            case 3:  // PT_INTERP
                let bytes = reader.bytes(at: offset, count: Int(min(fileSize, 4096)))
                interpreter = String(decoding: bytes.prefix { $0 != 0 }, as: UTF8.self)
            case 4:  // PT_NOTE
                if Self.notesOwnedByGo(reader.bytes(at: offset, count: Int(min(fileSize, 65536))), reader: reader) {
                    isGo = true
                }
            default: break
            }
        }
        if let dynamic {
            needed = Self.neededLibraries(reader: reader, dynamic: dynamic, loads: loads)
        }
    }

    private static func scriptInterpreter(ident: [UInt8]) -> String? {
        let line = ident.dropFirst(2).prefix { $0 != 0x0A }
        let text = String(decoding: line, as: UTF8.self)
        let word = text.split(whereSeparator: { $0 == " " || $0 == "\t" }).first
        return word.map(String.init)
    }

    private static func notesOwnedByGo(_ notes: [UInt8], reader: Reader) -> Bool {
        var cursor = 0
        while cursor + 12 <= notes.count {
            let nameSize = Int(reader.u32(notes, cursor))
            let descSize = Int(reader.u32(notes, cursor + 4))
            let nameStart = cursor + 12
            if nameSize == 3, nameStart + 3 <= notes.count, notes[nameStart..<nameStart + 3].elementsEqual([0x47, 0x6F, 0]) {
                return true
            }
            cursor = nameStart + ((nameSize + 3) & ~3) + ((descSize + 3) & ~3)
        }
        return false
    }

    private static func neededLibraries(reader: Reader, dynamic: (offset: UInt64, size: UInt64),
                                        loads: [(vaddr: UInt64, offset: UInt64, size: UInt64)]) -> [String] {
        let entries = reader.bytes(at: dynamic.offset, count: Int(min(dynamic.size, 1 << 20)))
        var neededOffsets: [UInt64] = []
        var stringTable: UInt64?
        var cursor = 0
        while cursor + 16 <= entries.count {
            let tag = reader.u64(entries, cursor)
            let value = reader.u64(entries, cursor + 8)
            if tag == 0 { break }
            if tag == 1 { neededOffsets.append(value) }  // DT_NEEDED
            if tag == 5 { stringTable = value }  // DT_STRTAB (an address)
            cursor += 16
        }
        guard let address = stringTable,
              let load = loads.first(where: { address >= $0.vaddr && address < $0.vaddr + $0.size })
        else { return [] }
        let tableOffset = address - load.vaddr + load.offset
        return neededOffsets.map { offset in
            let bytes = reader.bytes(at: tableOffset + offset, count: 256)
            return String(decoding: bytes.prefix { $0 != 0 }, as: UTF8.self)
        }
    }

    private struct Reader {
        let fd: FileDescriptor

        func bytes(at offset: UInt64, count: Int) -> [UInt8] {
            guard count > 0 else { return [] }
            var buffer = [UInt8](repeating: 0, count: count)
            let read = buffer.withUnsafeMutableBytes { raw in
                (try? fd.read(fromAbsoluteOffset: Int64(offset), into: raw)) ?? 0
            }
            return Array(buffer.prefix(read))
        }

        func u16(_ bytes: [UInt8], _ at: Int) -> UInt16 {
            guard at + 2 <= bytes.count else { return 0 }
            return UInt16(bytes[at]) | UInt16(bytes[at + 1]) << 8
        }

        func u32(_ bytes: [UInt8], _ at: Int) -> UInt32 {
            guard at + 4 <= bytes.count else { return 0 }
            return (0..<4).reduce(0) { $0 | UInt32(bytes[at + $1]) << (8 * UInt32($1)) }
        }

        func u64(_ bytes: [UInt8], _ at: Int) -> UInt64 {
            guard at + 8 <= bytes.count else { return 0 }
            return (0..<8).reduce(0) { $0 | UInt64(bytes[at + $1]) << (8 * UInt64($1)) }
        }
    }
}
