#if compiler(>=6.3)
import Testing

/// An ExecutorFactory needs an app's own main: these run the package's two executables and read
/// what they print.
@Suite("Apps")
struct AppTests {
    @Test func anAppWithLoopExecutorFactoryRunsItsMainActorInLoopMain() {
        let (status, output) = run(builtProduct("MainExecutorApp"))
        #expect(status == 0, "app output:\n\(output)")
        #expect(output.contains("all passed"), "app output:\n\(output)")
    }

    @Test func aSleepOnALoopGivesTheDefaultExecutorNoJob() {
        let (status, output) = run(builtProduct("DefaultExecutorProbe"))
        #expect(status == 0, "probe output:\n\(output)")
        #expect(output.contains("all passed"), "probe output:\n\(output)")
    }
}
#endif
