// Prints Instant.now(), Thread.sleep(MILLISECONDS), then the nanoseconds System.nanoTime() saw pass and Instant.now() again.
public class WallNap {
    public static void main(String[] arguments) throws InterruptedException {
        long milliseconds = Long.parseLong(arguments[0]);
        System.out.println(java.time.Instant.now());
        long start = System.nanoTime();
        Thread.sleep(milliseconds);
        System.out.println(System.nanoTime() - start);
        System.out.println(java.time.Instant.now());
    }
}
