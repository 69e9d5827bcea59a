// Thread.sleep(MILLISECONDS), then prints the nanoseconds System.nanoTime() saw pass.
public class Nap {
    public static void main(String[] arguments) throws InterruptedException {
        long milliseconds = Long.parseLong(arguments[0]);
        long start = System.nanoTime();
        Thread.sleep(milliseconds);
        System.out.println(System.nanoTime() - start);
    }
}
