// Prints the time twice and exits, never sleeping: on a frozen clock the JVM must still start and stop.
public class Now {
    public static void main(String[] arguments) {
        System.out.println(System.currentTimeMillis());
        System.out.println(java.time.Instant.now());
    }
}
