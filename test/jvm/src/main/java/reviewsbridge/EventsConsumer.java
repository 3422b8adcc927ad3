package reviewsbridge;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.networknt.schema.JsonSchema;
import com.networknt.schema.JsonSchemaFactory;
import com.networknt.schema.SpecVersion;
import com.networknt.schema.ValidationMessage;
import java.net.URI;
import java.net.URLEncoder;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.stream.Collectors;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * Reads every record of the bridge's topics (read_committed, from the beginning to the end offsets it finds) and
 * checks each one against the schema the registry holds for it: a structured CloudEvent against the schema its
 * {@code dataschema} URL serves (which must be the latest of its topic's subject), a framed value (Confluent wire
 * format: magic byte 0, schema id) against the schema of that id, with its CloudEvents attributes from the
 * {@code ce_} headers; state rows against their subject's schema. Prints one JSON line (counts per record type,
 * the problems found) and exits 1 when any record failed.
 *
 * <p>Usage: EventsConsumer BOOTSTRAP REGISTRY_URL TOPIC...
 */
public final class EventsConsumer {
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final JsonSchemaFactory SCHEMAS = JsonSchemaFactory.getInstance(SpecVersion.VersionFlag.V7);

  private final HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();
  private final String registry;
  private final Map<String, JsonSchema> schemaByUrl = new HashMap<>();
  private final Map<String, Integer> latestIdBySubject = new HashMap<>();
  private final Map<String, Integer> counts = new TreeMap<>();
  private final List<String> problems = new ArrayList<>();

  private EventsConsumer(String registry) {
    this.registry = registry;
  }

  public static void main(String[] args) throws Exception {
    if (args.length < 3) {
      System.err.println("usage: EventsConsumer BOOTSTRAP REGISTRY_URL TOPIC...");
      System.exit(2);
    }
    EventsConsumer consumer = new EventsConsumer(args[1].replaceAll("/+$", ""));
    consumer.run(args[0], List.of(args).subList(2, args.length));
    ObjectNode out = JSON.createObjectNode();
    out.set("counts", JSON.valueToTree(consumer.counts));
    out.set("problems", JSON.valueToTree(consumer.problems.stream().limit(20).collect(Collectors.toList())));
    System.out.println(JSON.writeValueAsString(out));
    System.exit(consumer.problems.isEmpty() ? 0 : 1);
  }

  private void run(String bootstrap, List<String> topics) throws Exception {
    Properties props = new Properties();
    props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    props.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
    props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
    props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
    props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
    try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props)) {
      List<TopicPartition> partitions = new ArrayList<>();
      for (String topic : topics) {
        consumer.partitionsFor(topic, Duration.ofSeconds(30))
            .forEach(p -> partitions.add(new TopicPartition(p.topic(), p.partition())));
      }
      consumer.assign(partitions);
      consumer.seekToBeginning(partitions);
      // With read_committed, the end offsets are the last stable offsets: everything committed so far.
      Map<TopicPartition, Long> ends = consumer.endOffsets(partitions, Duration.ofSeconds(30));
      long deadline = System.currentTimeMillis() + 60_000;
      while (partitions.stream().anyMatch(p -> consumer.position(p) < ends.get(p))) {
        if (System.currentTimeMillis() > deadline) {
          problems.add("timed out before the end offsets " + ends);
          return;
        }
        for (ConsumerRecord<byte[], byte[]> record : consumer.poll(Duration.ofMillis(200))) {
          check(record);
        }
      }
    }
  }

  private void check(ConsumerRecord<byte[], byte[]> record) {
    String where = record.topic() + "/" + record.partition() + "@" + record.offset();
    try {
      byte[] value = record.value();
      String subject = record.topic() + "-value";
      if (value == null) {
        count("tombstone");
        return;
      }
      boolean stateRow = "review.state".equals(header(record, "reviews-bridge-record"));
      if (value.length > 0 && value[0] == 0) {
        // Confluent wire format: the schema id, then the JSON of the value (an event's data: binary mode).
        int id = ByteBuffer.wrap(value, 1, 4).getInt();
        String url = registry + "/schemas/ids/" + id;
        JsonNode json = JSON.readTree(new String(value, 5, value.length - 5, StandardCharsets.UTF_8));
        expect(id == latestId(subject), where + ": schema id " + id + " is not the latest of " + subject);
        validate(url, json, where);
        if (stateRow) {
          count("review.state");
          return;
        }
        String type = header(record, "ce_type");
        expect(type != null && "1.0".equals(header(record, "ce_specversion")), where + ": no CloudEvents headers");
        expect(url.equals(header(record, "ce_dataschema")), where + ": ce_dataschema is not " + url);
        expect(header(record, "ce_id") != null && header(record, "ce_source") != null, where + ": ce_id/ce_source");
        count(type);
        return;
      }
      JsonNode json = JSON.readTree(value);
      if (stateRow) {
        validate(registry + "/schemas/ids/" + latestId(subject), json, where);
        count("review.state");
        return;
      }
      String dataschema = json.path("dataschema").asText("");
      expect(dataschema.startsWith(registry + "/schemas/ids/"), where + ": dataschema " + dataschema + " is not the registry's");
      expect(dataschema.equals(registry + "/schemas/ids/" + latestId(subject)), where + ": dataschema is not the latest of " + subject);
      validate(dataschema, json, where);
      count(json.path("type").asText("(no type)"));
    } catch (Exception e) {
      problems.add(where + ": " + e);
    }
  }

  private void validate(String url, JsonNode json, String where) throws Exception {
    JsonSchema schema = schemaByUrl.get(url);
    if (schema == null) {
      JsonNode answer = JSON.readTree(get(url));
      schema = SCHEMAS.getSchema(answer.get("schema").asText());
      schemaByUrl.put(url, schema);
    }
    Set<ValidationMessage> errors = schema.validate(json);
    for (ValidationMessage error : errors) problems.add(where + ": " + error.getMessage());
  }

  private int latestId(String subject) throws Exception {
    Integer id = latestIdBySubject.get(subject);
    if (id == null) {
      String path = "/subjects/" + URLEncoder.encode(subject, StandardCharsets.UTF_8) + "/versions/latest";
      id = JSON.readTree(get(registry + path)).get("id").asInt();
      latestIdBySubject.put(subject, id);
    }
    return id;
  }

  private String get(String url) throws Exception {
    HttpRequest request = HttpRequest.newBuilder(URI.create(url)).timeout(Duration.ofSeconds(10)).build();
    HttpResponse<String> response = http.send(request, HttpResponse.BodyHandlers.ofString());
    if (response.statusCode() != 200) throw new IllegalStateException("GET " + url + ": HTTP " + response.statusCode());
    return response.body();
  }

  private static String header(ConsumerRecord<byte[], byte[]> record, String name) {
    Header header = record.headers().lastHeader(name);
    return header == null || header.value() == null ? null : new String(header.value(), StandardCharsets.UTF_8);
  }

  private void expect(boolean condition, String problem) {
    if (!condition) problems.add(problem);
  }

  private void count(String type) {
    counts.merge(type, 1, Integer::sum);
  }
}
