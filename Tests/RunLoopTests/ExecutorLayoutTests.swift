import Dispatch
@testable import RunLoop
import Testing

// Issue 20, finding 8: LoopExecutor tells a task from other jobs by the runtime's task metadata,
// the first word of every task (LoopExecutor.swift, `taskMetadata`), which no documented API
// gives. If a runtime lays tasks out otherwise, the executor stays correct but loses its restart;
// this test fails loudly then, so that a toolchain update that changes the layout is seen.

/// A task executor that records, for each job it is given, whether the executor's check calls it
/// a task, and runs it on a global queue.
final class LayoutProbeExecutor: TaskExecutor {
    let seen = Log<Bool>()

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        seen.append(isTask(job))
        let executor = asUnownedTaskExecutor()
        DispatchQueue.global().async { job.runSynchronously(on: executor) }
    }
}

@Suite("LoopExecutor and the runtime's task layout")
struct ExecutorLayoutTests {
    @Test func theTaskMetadataIsReadAndRecognizesATasksJob() async throws {
        #expect(taskMetadata != nil, "the runtime's task metadata could not be read")
        let probe = LayoutProbeExecutor()
        let value = await Task(executorPreference: probe) { 42 }.value
        #expect(value == 42)
        #expect(!probe.seen.all.isEmpty)
        #expect(probe.seen.all.allSatisfy { $0 }, "a task's job was not recognized as a task: the runtime's layout changed")
    }
}
