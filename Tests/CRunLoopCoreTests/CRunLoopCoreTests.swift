import CRunLoopCoreSuite
import Foundation
import Testing

/// One C test of the suite (a `RLT_TEST` in Tests/CRunLoopCoreSuite), by its registry index.
struct CTest: Sendable, CustomTestStringConvertible {
    let index: Int
    let name: String

    var testDescription: String { name }

    /// Every registered C test, in registration order.
    static var all: [CTest] {
        (0..<rlt_count()).map { i in
            CTest(index: i, name: rlt_name(i).map { String(cString: $0) } ?? "#\(i)")
        }
    }
}

// Each C test runs on a fresh thread of its own (so with a fresh current loop); the cases run
// one at a time, since many of them measure time. The case waits for its thread without holding
// one of the few threads of Swift's cooperative pool: a C case may take seconds, and async tests
// of RunLoopTests running meanwhile need those threads to make progress.
@Test("C core", .serialized, arguments: CTest.all)
func cCore(_ test: CTest) async {
    let (result, text) = await withCheckedContinuation { (done: CheckedContinuation<(Int32, String), Never>) in
        let thread = Thread {
            var message = [CChar](repeating: 0, count: 1024)
            let result = message.withUnsafeMutableBufferPointer { buffer in
                rlt_run(test.index, buffer.baseAddress, buffer.count)
            }
            done.resume(returning: (result, message.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }))
        }
        thread.start()
    }
    #expect(result == 0, "\(test.name): \(text)")
}
