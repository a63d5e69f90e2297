// Prints golden vectors for tests/test_linkbench_random.py from the real JDK:
// java.util.Random and SecureRandom("SHA1PRNG") seeded as LinkBench's driver
// seeds it. Regenerate with:
//   javac -d /tmp Golden.java && java -cp /tmp Golden > golden.json
import java.nio.ByteBuffer;
import java.security.SecureRandom;
import java.util.Random;

public class Golden {
  static StringBuilder out = new StringBuilder();

  static void list(String name, long[] xs) {
    out.append("  \"").append(name).append("\": [");
    for (int i = 0; i < xs.length; i++) out.append(i > 0 ? ", " : "").append(xs[i]);
    out.append("],\n");
  }

  static void doubles(String name, double[] xs) {
    out.append("  \"").append(name).append("\": [");
    for (int i = 0; i < xs.length; i++) out.append(i > 0 ? ", " : "").append(Double.toString(xs[i]));
    out.append("],\n");
  }

  public static void main(String[] args) throws Exception {
    out.append("{\n");
    long[] seeds = {0L, 42L, -1L, 20343988438726021L, 53238253823453L, 4766565305853767165L};
    for (long seed : seeds) {
      Random r = new Random(seed);
      long[] ints = new long[20];
      for (int i = 0; i < 20; i++) ints[i] = r.nextInt();
      list("int_" + seed, ints);
      r = new Random(seed);
      int[] bounds = {1, 2, 3, 7, 10, 100, 1024, 1000000, 1073741825, 2147483647};
      long[] bounded = new long[200];
      for (int i = 0; i < 200; i++) bounded[i] = r.nextInt(bounds[i % bounds.length]);
      list("bounded_" + seed, bounded);
      r = new Random(seed);
      long[] longs = new long[20];
      for (int i = 0; i < 20; i++) longs[i] = r.nextLong();
      list("long_" + seed, longs);
      r = new Random(seed);
      double[] ds = new double[20];
      for (int i = 0; i < 20; i++) ds[i] = r.nextDouble();
      doubles("double_" + seed, ds);
      r = new Random(seed);
      double[] gs = new double[21];
      for (int i = 0; i < 21; i++) gs[i] = r.nextGaussian();
      doubles("gaussian_" + seed, gs);
    }
    long[] masterSeeds = {0L, 1L, 12345L, -987654321L};
    for (long seed : masterSeeds) {
      SecureRandom m = SecureRandom.getInstance("SHA1PRNG");
      m.setSeed(ByteBuffer.allocate(8).putLong(seed).array());
      long[] xs = new long[6];
      for (int i = 0; i < 6; i++) xs[i] = m.nextLong();
      list("sha1prng_long_" + seed, xs);
      m = SecureRandom.getInstance("SHA1PRNG");
      m.setSeed(ByteBuffer.allocate(8).putLong(seed).array());
      long[] bs = new long[45];
      byte[] b = new byte[7];
      for (int i = 0; i < 45; i += 7) {
        m.nextBytes(b);
        for (int j = 0; j < 7 && i + j < 45; j++) bs[i + j] = b[j] & 0xff;
      }
      list("sha1prng_bytes_" + seed, bs);
    }
    double[] rounds = {0.5, 1.5, 2.5, -0.5, -1.5, 0.49999999999999994, 7.4999999, 1e15 + 0.5};
    long[] rounded = new long[rounds.length];
    for (int i = 0; i < rounds.length; i++) rounded[i] = Math.round(rounds[i]);
    doubles("round_in", rounds);
    list("round_out", rounded);
    out.append("  \"jdk\": \"").append(System.getProperty("java.version")).append("\"\n}\n");
    System.out.print(out);
  }
}
