// One line in a Java test: assert the verdict's status (JDK 11+, java.net.http, no libraries).
//
//   java Verdict.java [BASE_URL] [SESSION]
//
// 200: the session is clean (and covered as required); 409: it is not, and the body (an
// RFC 9457 problem) says why; 404: the journal never saw the session. Exits 1 unless 200.
import java.net.URI;
import java.net.URLEncoder;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;

public class Verdict {
    public static void main(String[] args) throws Exception {
        String base = args.length > 0 ? args[0] : "http://localhost:8080";
        String session = args.length > 1 ? args[1] : "ci-7";
        URI uri = URI.create(base + "/__admin/verdict?session="
                + URLEncoder.encode(session, StandardCharsets.UTF_8));
        HttpResponse<String> verdict = HttpClient.newHttpClient()
                .send(HttpRequest.newBuilder(uri).build(), HttpResponse.BodyHandlers.ofString());

        // In a JUnit test, the one line: assertEquals(200, verdict.statusCode(), verdict.body());
        if (verdict.statusCode() != 200) {
            System.err.println(verdict.statusCode() + " " + verdict.body());
            System.exit(1);
        }
        System.out.println("ok: session " + session + " is clean");
    }
}
